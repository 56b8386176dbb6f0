-- Arbiter's Slurm job_submit plugin (job_submit/lua, Slurm 22.05 and later).
--
-- Install once: copy this file as job_submit.lua next to slurm.conf, set
-- JobSubmitPlugins=lua in slurm.conf and run `scontrol reconfigure` (see deploy/slurm/README.md).
-- It holds no rules itself: every rule comes from arbiter_submit_table.lua, which Arbiter's sync
-- writes beside it. The plugin reads that file on each GPU submission and loads it when it
-- changed, after checking the whole body against the checksum in its first line, so a sync
-- never restarts or reconfigures slurmctld. A table that is missing, empty, damaged,
-- unreadable, of another format or past its expiry fails safe: GPU jobs of Arbiter's project
-- accounts are refused with a message saying why. A user who is not a member of a project
-- account hears nothing from Arbiter: Slurm's association check answers them.
--
-- For a GPU request (--gres=gpu..., --gpus, --gpus-per-node, --gpus-per-task, --gpus-per-socket)
-- in a governed account it accepts, rewrites an untyped request to the one GPU type the project
-- may use in its pool, or refuses with a message naming the rule, the project's quota and what
-- to submit instead (in Chinese too when the job's environment asks for a zh locale: sbatch
-- passes it; srun and salloc do not, so their messages are in English).

ARBITER_PLUGIN_VERSION = "arbiter-job-submit 2"
local TABLE_FORMAT = 1
local TABLE_NAME = "arbiter_submit_table.lua"
local FIELDS = { "tres_per_job", "tres_per_node", "tres_per_socket", "tres_per_task" }
local NO_VALUE = 4294967294 -- Slurm's NO_VAL: the option was not given

local table_path = nil
local loaded = nil -- the table in force
local loaded_header = nil -- its first line
local governed_seen = {} -- every account a table ever governed (fail safe after a removal)
local current_call = "submission" -- or "update" (scontrol update), for the log
local current_job = "(new)"
local current_user = "?"

-- Slurm loads this file from slurm.conf's directory: the table sits beside it.
local function directory_of_config()
	local source = debug.getinfo(1, "S").source or ""
	local here = source:match("^@(.*)/[^/]*$")
	if here ~= nil then
		return here
	end
	local conf = os.getenv("SLURM_CONF") or "/etc/slurm/slurm.conf"
	return (conf:match("^(.*)/[^/]*$") or ".")
end

-- Adler-32 of a string (what the table's header carries for its body): Lua 5.1 has no bit
-- operations, and this needs none.
local function adler32(text)
	local a, b = 1, 0
	local length = #text
	local index = 1
	while index <= length do
		local last = math.min(index + 3999, length)
		local bytes = { string.byte(text, index, last) }
		for _, byte in ipairs(bytes) do
			a = (a + byte) % 65521
			b = (b + a) % 65521
		end
		index = last + 1
	end
	return b * 65536 + a
end

-- The whole file (nil if it cannot be opened).
local function read_file(path)
	local file = io.open(path, "rb")
	if file == nil then
		return nil
	end
	local text = file:read("*a")
	file:close()
	return text or ""
end

local loaded_text = nil -- the file the table in force was read from

-- The table in force, or nil and why not ("missing", "empty", "damaged", "unreadable",
-- "format", "expired"). The whole file is read on each GPU submission and compared with the
-- one in force; a changed file is loaded only if its body matches the header's checksum.
local function current_table()
	table_path = table_path or (directory_of_config() .. "/" .. TABLE_NAME)
	local text = read_file(table_path)
	if text == nil then
		loaded, loaded_header, loaded_text = nil, nil, nil
		return nil, "missing"
	end
	if text == "" then
		loaded, loaded_header, loaded_text = nil, nil, nil
		return nil, "empty"
	end
	if text ~= loaded_text then
		local header, body = text:match("^([^\n]*)\n(.*)$")
		local checksum = header and header:match(" checksum=(%d+)")
		if checksum == nil or tonumber(checksum) ~= adler32(body) then
			loaded, loaded_header, loaded_text = nil, nil, nil
			slurm.log_info("arbiter: submit table %s is damaged (checksum)", table_path)
			return nil, "damaged"
		end
		local chunk = loadstring(text)
		local ok, data = false, nil
		if chunk ~= nil then
			ok, data = pcall(chunk)
		end
		if not ok or type(data) ~= "table" then
			loaded, loaded_header, loaded_text = nil, nil, nil
			return nil, "unreadable"
		end
		if data.format ~= TABLE_FORMAT then
			loaded, loaded_header, loaded_text = nil, nil, nil
			return nil, "format"
		end
		loaded, loaded_header, loaded_text = data, header, text
		for account, _ in pairs(data.accounts or {}) do
			governed_seen[account] = true
		end
		slurm.log_info("arbiter: loaded submit table %s", tostring(data.fingerprint))
	end
	if (loaded.expires or 0) < os.time() then
		return nil, "expired"
	end
	return loaded, nil
end

-- "gres:gpu:a100:2" → "a100", 2; "gres:gpu:2" → "", 2; "gres/gpu" → "", 1; else nil.
local function parse_gpu(item)
	local rest = item:match("^gres[:/]gpu(.*)$") or item:match("^gpu(.*)$")
	if rest == nil then
		return nil
	end
	if rest == "" then
		return "", 1
	end
	local kind, count = rest:match("^:([%a_][%w_%-]*):(%d+)$")
	if kind ~= nil then
		return kind, tonumber(count)
	end
	count = rest:match("^:(%d+)$") or rest:match("^=(%d+)$")
	if count ~= nil then
		return "", tonumber(count)
	end
	kind = rest:match("^:([%a_][%w_%-]*)$")
	if kind ~= nil then
		return kind, 1
	end
	return nil
end

local function split(text)
	local items = {}
	for item in string.gmatch(text or "", "[^,]+") do
		items[#items + 1] = item
	end
	return items
end

local function known(value)
	return type(value) == "number" and value > 0 and value < NO_VALUE
end

-- How many of a field's GPUs one job takes (a per-node count times the nodes, ...).
local function multiplier(job_desc, field)
	local nodes = known(job_desc.min_nodes) and job_desc.min_nodes or 1
	if field == "tres_per_node" then
		return nodes
	elseif field == "tres_per_task" then
		return known(job_desc.num_tasks) and job_desc.num_tasks or 1
	elseif field == "tres_per_socket" then
		local sockets = known(job_desc.sockets_per_node) and job_desc.sockets_per_node or 1
		return sockets * nodes
	end
	return 1
end

-- The job's GPU requests: { field, item index, type ("" untyped), count, GPUs per job }.
local function gpu_requests(job_desc)
	local found = {}
	for _, field in ipairs(FIELDS) do
		local items = split(job_desc[field])
		for index, item in ipairs(items) do
			local kind, count = parse_gpu(item)
			if kind ~= nil and count ~= nil and count > 0 then
				found[#found + 1] = {
					field = field,
					index = index,
					kind = kind,
					count = count,
					total = count * multiplier(job_desc, field),
				}
			end
		end
	end
	return found
end

local function wants_chinese(job_desc)
	local env = job_desc.environment
	if type(env) ~= "table" then
		return false
	end
	for _, name in ipairs({ "LC_ALL", "LC_MESSAGES", "LANGUAGE", "LANG" }) do
		local value = env[name]
		if value ~= nil and value ~= "" then
			return value:lower():match("^zh") ~= nil
		end
	end
	return false
end

local function fill(template, values)
	return (template:gsub("{([%w_]+)}", function(key)
		local value = values[key]
		if value == nil then
			return "{" .. key .. "}"
		end
		return tostring(value)
	end))
end

-- The message in English, followed by Chinese when the job's locale asks for it.
local function say(data, job_desc, key, values)
	local messages = data.messages or {}
	local text = fill((messages.en or {})[key] or key, values)
	if wants_chinese(job_desc) and messages.zh and messages.zh[key] then
		text = text .. "\n" .. fill(messages.zh[key], values)
	end
	return text
end

-- What a table-less plugin says (the table carries every other message).
local FAIL_SAFE = {
	en = "Refused by Arbiter (rule: no GPU job of a governed project without current rules): "
		.. "the rules table %s is %s, so GPU jobs of Arbiter's project accounts (%s) are refused "
		.. "until the sync writes it again. Submit without GPUs, or ask ops to check Arbiter's "
		.. "Slurm sync.",
	zh = "Arbiter 拒绝（规则：没有最新规则时不接受受管项目的 GPU 作业）：规则表 %s %s，"
		.. "因此在同步重新写入之前，Arbiter 项目账户（%s）的 GPU 作业都会被拒绝。"
		.. "请提交不使用 GPU 的作业，或请运维检查 Arbiter 的 Slurm 同步。",
}
local FAIL_SAFE_STATE = {
	missing = { en = "missing", zh = "缺失" },
	empty = { en = "empty", zh = "为空" },
	damaged = { en = "damaged (its checksum does not match)", zh = "已损坏（校验和不符）" },
	unreadable = { en = "unreadable", zh = "无法读取" },
	format = { en = "of another format", zh = "格式不符" },
	expired = { en = "expired", zh = "已过期" },
}

-- Arbiter's project accounts are <pool>.<project>: the only dotted names it makes.
local function looks_governed(account)
	return governed_seen[account] == true or (account ~= nil and account:find(".", 1, true) ~= nil)
end

-- Refuse with a message to the user; the log keeps it too, with the job and the user: on
-- Slurm 22.05 a refused `scontrol update` shows only Slurm's generic text (log_user does not
-- reach it before 23.02), so that is where its reason is read (see the README).
local function refuse(message, job_desc)
	slurm.log_user("%s", message)
	slurm.log_info(
		"arbiter: refused %s of job %s by user %s: %s",
		current_call,
		current_job,
		tostring(job_desc and job_desc.user_name or current_user),
		(message:gsub("\n", " "))
	)
	return slurm.ESLURM_ACCOUNTING_POLICY or slurm.ERROR
end

local function quota_text(entry)
	local parts = {}
	local kinds = {}
	for kind, _ in pairs(entry.max or {}) do
		kinds[#kinds + 1] = kind
	end
	table.sort(kinds)
	for _, kind in ipairs(kinds) do
		parts[#parts + 1] = kind .. "=" .. tostring(entry.max[kind])
	end
	if entry.untyped ~= nil then
		parts[#parts + 1] = "total=" .. tostring(entry.untyped)
	end
	return table.concat(parts, " ")
end

local function allowed_kinds(entry)
	local kinds = {}
	for kind, count in pairs(entry.max or {}) do
		if count > 0 then
			kinds[#kinds + 1] = kind
		end
	end
	table.sort(kinds)
	return kinds
end

-- Decide one job: returns slurm.SUCCESS (maybe after rewriting job_desc) or an error code.
local function decide(job_desc, account, qos, user)
	local requests = gpu_requests(job_desc)
	if #requests == 0 then
		return slurm.SUCCESS
	end
	local data, why = current_table()
	if data == nil then
		if not looks_governed(account) then
			return slurm.SUCCESS
		end
		-- The cluster chose to fall back to Slurm's native limits (and Arbiter's guard) once
		-- its table has expired; a table never read, or unreadable, still refuses.
		if why == "expired" and loaded ~= nil and loaded.on_expiry == "native" then
			slurm.log_info("arbiter: table expired, native limits only for a GPU job of %s", account)
			return slurm.SUCCESS
		end
		local zh = wants_chinese(job_desc)
		local text = string.format(FAIL_SAFE.en, TABLE_NAME, FAIL_SAFE_STATE[why].en, account)
		if zh then
			text = text .. "\n" .. string.format(FAIL_SAFE.zh, TABLE_NAME, FAIL_SAFE_STATE[why].zh, account)
		end
		slurm.log_info("arbiter: refused a GPU job of %s: table %s", account, why)
		return refuse(text, job_desc)
	end
	local entry = (data.accounts or {})[account]
	if entry == nil then
		return slurm.SUCCESS -- not one of Arbiter's project accounts
	end
	-- Every member's association is in the table (with its default QOS): a user who is not
	-- a member hears nothing about the project from Arbiter. Slurm's own association check
	-- refuses the job ("Invalid account or account/partition combination specified").
	if user ~= nil and user ~= "" and (data.default_qos or {})[user .. "@" .. account] == nil then
		return slurm.SUCCESS
	end
	if qos == nil or qos == "" then
		qos = (data.default_qos or {})[(user or "") .. "@" .. account] or ""
	end
	local limits = (data.qos or {})[qos] or {}
	local kinds = allowed_kinds(entry)
	local values = {
		project = entry.project,
		pool = entry.pool,
		account = account,
		qos = qos,
		quota = quota_text(entry),
		types = table.concat(kinds, ", "),
		example = kinds[1] or "<type>",
	}
	local rewritten = {}
	local totals = {}
	local sum = 0
	for _, request in ipairs(requests) do
		values.count = request.count
		values.total = request.total
		local kind = request.kind
		if kind == "" and entry.untyped_ok then
			-- The pool has an untyped flavor: untyped limits hold natively.
			kind = ""
		elseif kind == "" then
			if #kinds == 0 then
				return refuse(say(data, job_desc, "no_quota", values), job_desc)
			elseif #kinds > 1 then
				return refuse(say(data, job_desc, "untyped_many", values), job_desc)
			end
			kind = kinds[1]
			values.type = kind
			rewritten[#rewritten + 1] = request
			request.kind = kind
		else
			values.type = kind
			local top = (entry.max or {})[kind]
			if top == nil or top <= 0 then
				return refuse(say(data, job_desc, "no_quota_type", values), job_desc)
			end
		end
		totals[kind] = (totals[kind] or 0) + request.total
		sum = sum + request.total
	end
	for kind, total in pairs(totals) do
		local top = kind == "" and entry.untyped or (entry.max or {})[kind]
		if top ~= nil and total > top then
			values.type = kind ~= "" and kind or "gpu"
			values.total = total
			values.max = top
			return refuse(say(data, job_desc, "over_max", values), job_desc)
		end
	end
	values.total = sum
	if limits.per_job ~= nil and sum > limits.per_job then
		values.cap = limits.per_job
		return refuse(say(data, job_desc, "over_per_job", values), job_desc)
	end
	if limits.cap ~= nil and sum > limits.cap then
		values.cap = limits.cap
		return refuse(say(data, job_desc, "over_tier_cap", values), job_desc)
	end
	if #rewritten > 0 then
		for _, field in ipairs(FIELDS) do
			local items = split(job_desc[field])
			local changed = false
			for _, request in ipairs(rewritten) do
				if request.field == field then
					local prefix = items[request.index]:match("^gres/") and "gres/gpu:" or "gres:gpu:"
					items[request.index] = prefix .. request.kind .. ":" .. tostring(request.count)
					changed = true
				end
			end
			if changed then
				job_desc[field] = table.concat(items, ",")
			end
		end
		values.type = rewritten[1].kind
		values.count = rewritten[1].count
		slurm.log_user("%s", say(data, job_desc, "rewritten", values))
	end
	return slurm.SUCCESS
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	current_call, current_job, current_user = "submission", "(new)", tostring(job_desc.user_name)
	local account = job_desc.account or job_desc.default_account
	local qos = job_desc.qos or job_desc.default_qos
	return decide(job_desc, account, qos, job_desc.user_name)
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	local touches = false
	for _, field in ipairs(FIELDS) do
		if job_desc[field] ~= nil then
			touches = true
		end
	end
	if not touches then
		return slurm.SUCCESS
	end
	current_call = "update"
	current_job = tostring(job_rec and job_rec.job_id or "?")
	current_user = tostring(job_rec and job_rec.user_name or "?")
	local account = job_desc.account or (job_rec and job_rec.account)
	local qos = job_desc.qos or (job_rec and job_rec.qos)
	return decide(job_desc, account, qos, job_rec and job_rec.user_name)
end

slurm.log_info("arbiter: %s loaded", ARBITER_PLUGIN_VERSION)
return slurm.SUCCESS

-- wrk's script for bench/placement.py (run by it; not on its own).
--
-- BENCH_PATHS_FILE lists the URLs to request, one a line (one is picked at random per
-- request); BENCH_TOKEN is the API token. At the end it prints one line of JSON: the
-- requests, the errors (connections, reads, writes, timeouts and non-2xx answers), the
-- duration and the latencies in microseconds (what bench/placement.py reads).

local token = os.getenv("BENCH_TOKEN") or ""
local paths = {}
for line in io.lines(os.getenv("BENCH_PATHS_FILE")) do
  paths[#paths + 1] = line
end
local headers = { ["Authorization"] = "Token " .. token }

function init(args)
  -- Each of wrk's threads has its own state: a seed of its own.
  math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)"), 16) % 100000)
end

function request()
  return wrk.format("GET", paths[math.random(#paths)], headers)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "errors": %d, '
      .. '"p50_us": %d, "p99_us": %d, "mean_us": %.1f}\n',
    summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout + e.status,
    latency:percentile(50), latency:percentile(99), latency.mean
  ))
end

// A real OpenID Connect provider for Arbiter's tests and for trying the sign-in locally:
// panva's oidc-provider (OpenID Certified), with its people read from a JSON file.
//
// Everything comes from the environment (deploy/oidc/README.md):
//   ARBITER_OIDC_PROVIDER_PORT   the port on 127.0.0.1 (the issuer is http://127.0.0.1:PORT)
//   ARBITER_OIDC_PROVIDER_CLIENT client id, secret and redirect URIs, as JSON:
//                                {"client_id", "client_secret", "redirect_uris": [...],
//                                 "post_logout_redirect_uris": [...]}
//   ARBITER_OIDC_PROVIDER_PEOPLE the JSON file of people, read again at every lookup (so a
//                                test changes a person's groups or disables them by rewriting
//                                it): {"alice": {"sub", "password", "name", "given_name",
//                                "family_name", "email", "locale", "groups": [], "disabled"}}
//   ARBITER_OIDC_PROVIDER_KEYS   the JSON file of the private signing keys (a JWK set); a test
//                                keeps the file to mint expired or wrong-audience tokens
//                                signed with the provider's own key.
// A disabled or deleted person cannot sign in, and their refresh tokens are refused
// (oidc-provider looks the account up again at every refresh).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { join } from 'node:path';
import { URL, pathToFileURL } from 'node:url';

// The package is installed outside the work tree (deploy/oidc/install.sh); its folder of
// node_modules is named by ARBITER_OIDC_PROVIDER_MODULES.
const modules = process.env.ARBITER_OIDC_PROVIDER_MODULES || '/var/cache/arbiter-oidc/node_modules';
const { default: Provider } = await import(
  pathToFileURL(join(modules, 'oidc-provider', 'lib', 'index.js')).href
);

const port = Number(process.env.ARBITER_OIDC_PROVIDER_PORT || '9400');
const issuer = `http://127.0.0.1:${port}`;
const client = JSON.parse(process.env.ARBITER_OIDC_PROVIDER_CLIENT);
const peopleFile = process.env.ARBITER_OIDC_PROVIDER_PEOPLE;
const keys = JSON.parse(readFileSync(process.env.ARBITER_OIDC_PROVIDER_KEYS, 'utf8'));

function people() {
  return JSON.parse(readFileSync(peopleFile, 'utf8'));
}

function personBySub(sub) {
  const found = Object.entries(people()).find(([, person]) => person.sub === sub);
  return found && !found[1].disabled ? found[1] : undefined;
}

const configuration = {
  clients: [{
    client_id: client.client_id,
    client_secret: client.client_secret,
    redirect_uris: client.redirect_uris,
    post_logout_redirect_uris: client.post_logout_redirect_uris || [],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  jwks: keys,
  // PKCE for every client, confidential ones too: a client that sends none is refused.
  pkce: { required: () => true },
  scopes: ['openid', 'offline_access', 'profile', 'email', 'groups'],
  claims: {
    openid: ['sub'],
    profile: ['name', 'given_name', 'family_name', 'locale', 'preferred_username'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  // The scopes' claims in the ID token as well as at the userinfo endpoint.
  conformIdTokenClaims: false,
  // A refresh token for every code grant: Arbiter uses it to ask whether the account still
  // exists before it accepts the person's API tokens.
  issueRefreshToken: async (ctx, oidcClient) => oidcClient.grantTypeAllowed('refresh_token'),
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      // The provider asks before it ends its session, as most do.
      logoutSource: async (ctx, form) => {
        ctx.body = `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Test provider: sign out</title></head>
<body><h1>Sign out of the test identity provider?</h1>${form}
<button id="logout-yes" type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
<button id="logout-no" type="submit" form="op.logoutForm">No, stay signed in</button></body></html>`;
      },
    },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ['arbiter-test-provider-cookie-key'] },
  findAccount: async (ctx, sub) => {
    const person = personBySub(sub);
    if (!person) return undefined;
    return {
      accountId: sub,
      claims: async () => ({
        sub,
        name: person.name,
        given_name: person.given_name,
        family_name: person.family_name,
        preferred_username: person.preferred_username,
        email: person.email,
        email_verified: true,
        locale: person.locale,
        groups: person.groups || [],
      }),
    };
  },
  ttl: { AccessToken: 600, IdToken: 600, RefreshToken: 86400, Session: 86400, Grant: 86400 },
};

const provider = new Provider(issuer, configuration);
// Every refusal in the log, with its cause (the tests print the log when they fail).
for (const event of ['authorization.error', 'grant.error', 'end_session.error', 'userinfo.error', 'server_error']) {
  provider.on(event, (ctx, error) => {
    console.error(`${event}: ${error.message} ${error.error_description || ''} ${error.cause ? error.cause.message : ''}`);
  });
}

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function loginPage(uid, message) {
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Test provider: sign in</title></head>
<body><h1>Test identity provider</h1>${message ? `<p id="error">${escape(message)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
<label>Username <input name="username" id="username" autofocus></label>
<label>Password <input name="password" id="password" type="password"></label>
<button type="submit" id="submit">Sign in</button></form></body></html>`;
}

function sameText(a, b) {
  const left = Buffer.from(String(a));
  const right = Buffer.from(String(b));
  return left.length === right.length && timingSafeEqual(left, right);
}

async function readForm(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new Error('interaction mismatch');
  if (details.prompt.name === 'consent') {
    // Arbiter is a first-party client: what it asks for is granted.
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    const missing = details.prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    return;
  }
  if (action !== 'login' || req.method !== 'POST') {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(loginPage(uid, ''));
    return;
  }
  const form = await readForm(req);
  const person = people()[form.get('username') || ''];
  if (!person || !sameText(person.password, form.get('password') || '')) {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(loginPage(uid, 'Wrong username or password.'));
    return;
  }
  if (person.disabled) {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(loginPage(uid, 'This account is disabled.'));
    return;
  }
  await provider.interactionFinished(req, res, { login: { accountId: person.sub } }, { mergeWithLastSubmission: false });
}

const callback = provider.callback();
createServer(async (req, res) => {
  const url = new URL(req.url, issuer);
  const match = url.pathname.match(/^\/interaction\/([^/]+)(?:\/(login))?$/);
  if (!match) {
    callback(req, res);
    return;
  }
  try {
    await interaction(req, res, match[1], match[2]);
  } catch (error) {
    res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(`interaction failed: ${error.message}`);
  }
}).listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${issuer}`);
});

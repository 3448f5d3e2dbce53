// A real OpenID provider for the sign-in tests: npm's certified oidc-provider (9.x), not
// written here, on a loopback port the kernel picks. Usage:
//   node oidc_provider.mjs SETTINGS NODE_MODULES
// NODE_MODULES is the folder oidc-provider is installed in (.ci/setup: .venv/node/node_modules,
// which Node's own lookup from this file would not find); SETTINGS a JSON file the test writes:
//   {"scopes": ["mcp:admin", ...], "access_token_ttl_s": 600, "backdate_s": 0,
//    "clients": [{"client_id": ..., "redirect_uris": [...], "token_endpoint_auth_method": "none"}]}
// backdate_s moves every access token's iat and exp that far into the past (a token that
// expired before it was issued, for the tests of expired tokens, with no wait).
// Once it listens it prints one line on stdout, "listening <issuer>", and runs until killed.
//
// What the tests need of it: dynamic client registration (the MCP SDK client registers
// itself), PKCE (S256, required of every client), resource indicators (RFC 8707) so that an
// authorization for resource R gets a JWT access token (RS256, a key made at start) whose
// `aud` is R, `sub` the person and `scope` the resource's granted scopes (its `kid` new at each
// start, so two providers never share one); and a login and a
// consent page the test drives as a browser would (an HTML form each, posted back here).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [settingsFile, nodeModules] = process.argv.slice(2);
const settings = JSON.parse(readFileSync(settingsFile, 'utf8'));
const packageDir = join(nodeModules, 'oidc-provider');
const { main } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
const { default: Provider } = await import(pathToFileURL(join(packageDir, main)).href);
const scopes = settings.scopes ?? [];
const server = createServer();
await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: randomBytes(8).toString('hex'), use: 'sig', alg: 'RS256' };

const provider = new Provider(issuer, {
  clients: settings.clients ?? [],
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', ...scopes],
  claims: { openid: ['sub'] },
  pkce: { required: () => true },
  findAccount: (ctx, accountId) => ({ accountId, claims: () => ({ sub: accountId }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: { AccessToken: settings.access_token_ttl_s ?? 600 },
  formats: {
    customizers: {
      jwt: (ctx, token, jwt) => {
        jwt.payload.iat -= settings.backdate_s ?? 0;
        jwt.payload.exp -= settings.backdate_s ?? 0;
      },
    },
  },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // A client that names no resource gets the one it was granted (the MCP SDK names it).
      defaultResource: (ctx, client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: scopes.join(' '),
        audience: resource,
        accessTokenTTL: settings.access_token_ttl_s ?? 600,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
});

const escape = (text) => String(text).replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

function page(uid, prompt, details) {
  const action = `/interaction/${uid}`;
  if (prompt === 'login') {
    return `<!doctype html><title>Sign in</title><form method="post" action="${action}">`
      + '<input type="hidden" name="prompt" value="login"><label>Who are you? <input name="login"></label>'
      + '<button type="submit">Sign in</button></form>';
  }
  const asked = Object.entries(details.missingResourceScopes ?? {})
    .map(([resource, wanted]) => `<li>${escape(resource)}: ${escape(wanted.join(' '))}</li>`).join('');
  return `<!doctype html><title>Consent</title><ul>${asked}</ul><form method="post" action="${action}">`
    + '<input type="hidden" name="prompt" value="consent"><button type="submit">Allow</button></form>';
}

async function form(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

async function finish(req, res, fields) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, session, params, grantId } = details;
  if (fields.get('prompt') !== prompt.name) throw new Error(`this interaction asks for ${prompt.name}`);
  if (prompt.name === 'login') {
    const login = fields.get('login');
    if (!login) throw new Error('login: name the person signing in');
    return provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
  }
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
  if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
  for (const [resource, wanted] of Object.entries(prompt.details.missingResourceScopes ?? {})) {
    grant.addResourceScope(resource, wanted.join(' '));
  }
  const result = { consent: { grantId: await grant.save() } };
  return provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

async function interaction(req, res, uid) {
  try {
    if (req.method === 'POST') {
      await finish(req, res, await form(req));
      return;
    }
    const { prompt } = await provider.interactionDetails(req, res);
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(page(uid, prompt.name, prompt.details));
  } catch (error) {
    res.statusCode = 400;
    res.setHeader('content-type', 'text/plain; charset=utf-8');
    res.end(`interaction ${uid}: ${error.message}\n`);
  }
}

const answer = provider.callback();
server.on('request', (req, res) => {
  const match = /^\/interaction\/([\w-]+)$/.exec(new URL(req.url, issuer).pathname);
  if (match) interaction(req, res, match[1]);
  else answer(req, res);
});
process.on('SIGTERM', () => { server.close(); process.exit(0); });
process.stdout.write(`listening ${issuer}\n`);

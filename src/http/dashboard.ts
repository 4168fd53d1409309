import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Context } from 'hono';
import type { HttpApp } from './app.ts';
import type { DashboardAuth } from './dashboard-auth.ts';
import type { DashboardEvents } from './dashboard-events.ts';

/** What the dashboard routes need. */
export interface DashboardDeps {
  auth: DashboardAuth;
  live: DashboardEvents;
}

interface Asset {
  body: string;
  type: string;
  etag: string;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.svg': 'image/svg+xml',
};

/** Scripts, styles and data only from the gateway itself; no framing (the actions are one click away). */
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
  + "base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";

function asset(file: string, body = readFileSync(file, 'utf8')): Asset {
  return { body, type: TYPES[path.extname(file)] ?? 'application/octet-stream', etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` };
}

/** Every file of `assets/`, read once, by name; markdown-it's browser build from node_modules (no CDN). */
function loadAssets(): Map<string, Asset> {
  const dir = fileURLToPath(new URL('./assets/', import.meta.url));
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(dir)) assets.set(name, asset(path.join(dir, name)));
  const markdownIt = path.join(path.dirname(createRequire(import.meta.url).resolve('markdown-it/package.json')), 'dist/browser/markdown-it.esm.min.mjs');
  // Without its source map comment: the map is not served.
  assets.set('vendor/markdown-it.mjs', asset(markdownIt, readFileSync(markdownIt, 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n')));
  return assets;
}

function serve(c: Context, item: Asset | undefined): Response {
  if (!item) return c.json({ error: { message: `No asset ${c.req.path}.`, type: 'not_found_error', code: 'not_found' } }, 404);
  c.header('x-content-type-options', 'nosniff');
  c.header('referrer-policy', 'no-referrer');
  c.header('cache-control', 'no-cache');
  c.header('etag', item.etag);
  if (item.type.startsWith('text/html')) c.header('content-security-policy', CSP);
  if (c.req.header('if-none-match') === item.etag) return c.body(null, 304);
  return c.body(item.body, 200, { 'content-type': item.type });
}

/**
 * `GET /`: the dashboard, or its sign-in page when `gateway.authToken` is set and a browser (`Accept: text/html`)
 * is not signed in (other callers without the token get 401 JSON, as on every route but `/healthz`);
 * `GET /assets/*` and the favicon; sign-in routes ({@link DashboardAuth}); the live event stream ({@link DashboardEvents}).
 */
export function mountDashboard(deps: DashboardDeps): (app: HttpApp) => void {
  const assets = loadAssets();
  return (app) => {
    app.get('/', (c) => serve(c, assets.get(deps.auth.via(c) ? 'dashboard.html' : 'sign-in.html')));
    app.get('/favicon.svg', (c) => serve(c, assets.get('favicon.svg')));
    app.get('/favicon.ico', (c) => serve(c, assets.get('favicon.svg')));
    app.get('/assets/*', (c) => {
      const name = c.req.path.slice('/assets/'.length);
      return serve(c, name.endsWith('.html') ? undefined : assets.get(name));
    });
    deps.auth.mount(app);
    // A stream opened with a session cookie ends when that cookie is signed out.
    deps.live.mount(app, (c) => deps.auth.sessionOf(c));
    deps.auth.onSignOut((nonce) => deps.live.endSession(nonce));
  };
}

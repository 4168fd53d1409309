import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Context } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import type { Clock } from '../core/clock.ts';
import type { HttpApp } from './app.ts';
import { clientAddress } from './client-key.ts';
import { errorBody, jsonError } from './http-error.ts';

/** Name of the dashboard's session cookie. */
export const SESSION_COOKIE = 'switchboard_session';
const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/**
 * Routes a browser needs before it is signed in: static assets (no secrets), whether sign-in is needed, sign-in
 * and out. `GET /` is public only to browsers (`Accept: text/html`), which get the sign-in page.
 */
const PUBLIC_GET = /^\/(?:favicon\.(?:svg|ico)|assets\/[\w./-]+|dashboard\/session)$/;
const PUBLIC_POST = new Set(['/dashboard/sign-in', '/dashboard/sign-out']);
/** Wrong tokens per client address and minute before further wrong ones answer 429 (the right token still signs in). */
const MAX_FAILURES_PER_MINUTE = 10;
/**
 * Header the sign-in page sends: a refused sign-in then answers 200 `{ signedIn: false, error }` instead of
 * 401/429, so the browser logs no failed request in the console. Programs get the status codes.
 */
const SIGN_IN_PAGE_HEADER = 'x-switchboard-sign-in';

/** Options of {@link createDashboardAuth}. */
export interface DashboardAuthOptions {
  /** `gateway.authToken`; empty = no sign-in (loopback only, guarded by the same-origin checks). */
  token: string;
  /** Where sign-outs are remembered until their cookie would have expired (`dashboard-sign-outs.json`). */
  stateDir: string;
  clock: Clock;
  /** Cookie lifetime (default 7 days). */
  maxAgeSeconds?: number;
  /** Most client addresses remembered with recent wrong tokens (default 10,000; the oldest are forgotten first). */
  maxTrackedClients?: number;
}

/** How a request is authenticated: the session cookie, the bearer header, or no token configured. */
export type DashboardAuthVia = 'cookie' | 'bearer' | 'open';

/**
 * Browser sign-in for the dashboard. The owner types `gateway.authToken` once; it is exchanged for an
 * `HttpOnly`, `SameSite=Strict` cookie signed with the token (HMAC-SHA256), so it survives a gateway restart
 * and a new token signs every browser out. A request with the cookie is treated like one with the bearer
 * header, except that a state-changing one must come from the gateway's own page (`Sec-Fetch-Site:
 * same-origin`, or else an `Origin` naming the `Host`).
 */
export interface DashboardAuth {
  /** True when `gateway.authToken` is set. */
  readonly required: boolean;
  /** Client addresses with wrong tokens in the last minute (bounded by `maxTrackedClients`). */
  readonly throttledClients: number;
  /** For `createHttpApp`: `'allow'` (public route or signed-in browser), a 403 (cross-site), or undefined (bearer decides). */
  verdict(c: Context): 'allow' | Response | undefined;
  /** How this request is signed in, if it is. */
  via(c: Context): DashboardAuthVia | undefined;
  /** The nonce of this request's valid session cookie (one per sign-in), if it has one. */
  sessionOf(c: Context): string | undefined;
  /** Called with the nonce of each cookie signed out (to end what that browser has open, such as event streams). */
  onSignOut(listener: (nonce: string) => void): void;
  /** `GET /dashboard/session`, `POST /dashboard/sign-in` `{token}`, `POST /dashboard/sign-out`. */
  mount(app: HttpApp): void;
}

/** True for a request a browser makes for a page (navigation), not a program asking for data. */
function wantsHtml(c: Context): boolean {
  return (c.req.header('accept') ?? '').toLowerCase().includes('text/html');
}

/** True when a state-changing request comes from a page of this gateway (not another site). */
export function fromOwnPage(c: Context): boolean {
  const site = c.req.header('sec-fetch-site');
  if (site) return site === 'same-origin';
  const origin = c.req.header('origin');
  if (!origin) return false;
  try {
    return new URL(origin).host.toLowerCase() === (c.req.header('host') ?? '').trim().toLowerCase();
  } catch {
    return false;
  }
}

/**
 * True for a request no web page made: neither `Origin` nor `Sec-Fetch-Site` (curl, Node's fetch). Browsers send
 * `Origin` on every cross-site POST, so such a request cannot be a forged one from another site.
 */
function fromProgram(c: Context): boolean {
  return c.req.header('origin') === undefined && c.req.header('sec-fetch-site') === undefined;
}

const b64 = (buffer: Buffer) => buffer.toString('base64url');

function sameSecret(a: string, b: string): boolean {
  // Hashes of equal length, so the comparison time says nothing about the token.
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

export function createDashboardAuth(options: DashboardAuthOptions): DashboardAuth {
  const { token, clock } = options;
  const maxAgeMs = (options.maxAgeSeconds ?? 7 * 86_400) * 1000;
  const file = path.join(options.stateDir, 'dashboard-sign-outs.json');
  let signedOut: Map<string, number> | undefined;
  const failures = new Map<string, { count: number; since: number }>();
  const maxTracked = options.maxTrackedClients ?? 10_000;
  const signOutListeners: ((nonce: string) => void)[] = [];
  /** Forgets windows that are over, and the oldest clients beyond the cap (a Map iterates in insertion order). */
  const pruneFailures = (now: number) => {
    for (const [client, f] of failures) if (now - f.since >= 60_000) failures.delete(client);
    for (const client of failures.keys()) {
      if (failures.size <= maxTracked) break;
      failures.delete(client);
    }
  };

  const revoked = (): Map<string, number> => {
    if (signedOut) return signedOut;
    signedOut = new Map();
    try {
      for (const [nonce, until] of Object.entries(JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>)) signedOut.set(nonce, until);
    } catch { /* none yet */ }
    return signedOut;
  };
  const remember = (nonce: string, until: number) => {
    const list = revoked();
    for (const [n, t] of list) if (t <= clock.now()) list.delete(n);
    list.set(nonce, until);
    writeFileSync(`${file}.tmp`, JSON.stringify(Object.fromEntries(list)));
    renameSync(`${file}.tmp`, file);
  };

  const mac = (issued: string, nonce: string) => b64(createHmac('sha256', token).update(`switchboard-dashboard.v1.${issued}.${nonce}`).digest());
  const issue = () => {
    const issued = clock.now().toString(36);
    const nonce = b64(randomBytes(18));
    return `v1.${issued}.${nonce}.${mac(issued, nonce)}`;
  };
  /** The cookie's nonce and expiry when it is genuine, unexpired and not signed out. */
  const check = (value: string | undefined): { nonce: string; until: number } | undefined => {
    const [v, issued, nonce, sig] = value?.split('.') ?? [];
    if (v !== 'v1' || !issued || !nonce || !sig || !sameSecret(sig, mac(issued, nonce))) return undefined;
    const until = parseInt(issued, 36) + maxAgeMs;
    if (!(until > clock.now()) || revoked().has(nonce)) return undefined;
    return { nonce, until };
  };
  const bearer = (c: Context) => /^Bearer\s+(.+)$/i.exec(c.req.header('authorization') ?? '')?.[1]?.trim();
  const secure = (c: Context) => new URL(c.req.url).protocol === 'https:' || c.req.header('x-forwarded-proto') === 'https';
  const cookie = (c: Context, value: string, maxAge: number) => setCookie(c, SESSION_COOKIE, value, { path: '/', httpOnly: true, sameSite: 'Strict', secure: secure(c), maxAge });
  const refuseCrossSite = (c: Context) => jsonError(c, 403, 'Refused: this request did not come from the dashboard page of this gateway.', 'cross_site_request');

  const auth: DashboardAuth = {
    required: Boolean(token),
    get throttledClients() {
      pruneFailures(clock.now());
      return failures.size;
    },
    verdict(c) {
      const p = c.req.path;
      const read = c.req.method === 'GET' || c.req.method === 'HEAD';
      if (read ? PUBLIC_GET.test(p) || (p === '/' && wantsHtml(c)) : c.req.method === 'POST' && PUBLIC_POST.has(p)) return 'allow';
      if (c.req.header('authorization') !== undefined || !check(getCookie(c, SESSION_COOKIE))) return undefined;
      return STATE_CHANGING.has(c.req.method) && !fromOwnPage(c) ? refuseCrossSite(c) : 'allow';
    },
    via(c) {
      if (!token) return 'open';
      const given = bearer(c);
      if (given !== undefined) return sameSecret(given, token) ? 'bearer' : undefined;
      return check(getCookie(c, SESSION_COOKIE)) ? 'cookie' : undefined;
    },
    sessionOf(c) {
      return token && bearer(c) === undefined ? check(getCookie(c, SESSION_COOKIE))?.nonce : undefined;
    },
    onSignOut(listener) {
      signOutListeners.push(listener);
    },
    mount(app) {
      app.get('/dashboard/session', (c) => {
        c.header('cache-control', 'no-store');
        return c.json({ authRequired: auth.required, signedIn: auth.via(c) !== undefined, via: auth.via(c) ?? null });
      });
      app.post('/dashboard/sign-in', async (c) => {
        // A program may sign in too (it still has to know the token); its cookie's actions need the own page.
        if (!fromOwnPage(c) && !fromProgram(c)) return refuseCrossSite(c);
        if (!token) return c.json({ signedIn: true, via: 'open' });
        const refuse = (status: 401 | 429, message: string, code: string) => (c.req.header(SIGN_IN_PAGE_HEADER)
          ? c.json({ signedIn: false, ...errorBody(status, message, code) })
          : jsonError(c, status, message, code));
        const typed = ((await c.req.json().catch(() => ({}))) as { token?: unknown }).token;
        // The right token always signs in, so wrong ones (behind a proxy: everyone's) cannot lock the owner out.
        // The limit adds no secrecy (a wrong bearer header on any route also answers at once); it makes one
        // address's guessing stand out (429s in the log). The token's length is what protects it (README).
        if (typeof typed !== 'string' || !sameSecret(typed.trim(), token)) {
          const client = clientAddress(c);
          const now = clock.now();
          const seen = failures.get(client);
          const current = seen && now - seen.since < 60_000 ? seen : undefined;
          // Re-inserted, so it is the newest when the cap forgets the oldest.
          failures.delete(client);
          failures.set(client, current ? { count: current.count + 1, since: current.since } : { count: 1, since: now });
          pruneFailures(now);
          if (current && current.count >= MAX_FAILURES_PER_MINUTE) return refuse(429, 'Too many wrong tokens; wait a minute and try again.', 'rate_limit_exceeded');
          return refuse(401, 'Wrong token: that is not this gateway\'s gateway.authToken.', 'wrong_token');
        }
        cookie(c, issue(), Math.floor(maxAgeMs / 1000));
        return c.json({ signedIn: true, via: 'cookie' });
      });
      app.post('/dashboard/sign-out', (c) => {
        if (!fromOwnPage(c)) return refuseCrossSite(c);
        const current = check(getCookie(c, SESSION_COOKIE));
        if (current) {
          remember(current.nonce, current.until);
          for (const listener of signOutListeners) listener(current.nonce);
        }
        cookie(c, '', 0);
        return c.json({ signedIn: false });
      });
    },
  };
  return auth;
}

import type { Context, MiddlewareHandler } from 'hono';
import { jsonError } from './http-error.ts';

/** Options of {@link sameOriginGuard}. */
export interface SameOriginOptions {
  /** `gateway.host`: its own name is accepted in `Host` (unless it is a wildcard address). */
  host: string;
  /** `gateway.allowedHosts`: further names, e.g. the public name of a reverse proxy that keeps `Host`. */
  allowedHosts: readonly string[];
}

/** Names every loopback gateway answers to. */
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'];
const WILDCARD = new Set(['0.0.0.0', '::', '[::]']);
const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The host name of a `Host` header or URL host (`name[:port]`, `[v6][:port]`), lowercase, without brackets. */
export function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']') > 0 ? h.indexOf(']') : undefined);
  const colon = h.indexOf(':');
  // More than one colon without brackets: a bare IPv6 address.
  if (colon >= 0 && h.indexOf(':', colon + 1) >= 0) return h;
  return colon >= 0 ? h.slice(0, colon) : h;
}

/** The host names requests may name: loopback names, `gateway.host`, `gateway.allowedHosts`. */
export function allowedHostNames(options: SameOriginOptions): Set<string> {
  const names = new Set(LOOPBACK_NAMES);
  if (!WILDCARD.has(options.host)) names.add(hostName(options.host));
  for (const name of options.allowedHosts) names.add(hostName(name));
  return names;
}

const isLoopbackV4 = (name: string) => /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);

function isJson(contentType: string): boolean {
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || /^application\/[\w.+-]+\+json$/.test(type);
}

function refuse(c: Context, message: string, code: string): Response {
  return jsonError(c, 403, message, code);
}

/**
 * Same-origin protection for a gateway without `gateway.authToken` (on loopback; elsewhere a token is
 * required). Without it, any web page the operator visits could drive the gateway:
 *
 * - **DNS rebinding**: `Host` must name this gateway (loopback names, `gateway.host`, `gateway.allowedHosts`),
 *   for every route, reads included.
 * - **Cross-site requests**: a state-changing request (POST, PUT, PATCH, DELETE) is refused when it carries
 *   an `Origin` other than the gateway's own, a `Sec-Fetch-Site` of another site, or a body that is not JSON
 *   without a matching `Origin` (an HTML form or a "simple" cross-site `fetch` cannot send JSON without a
 *   CORS preflight, which is never granted: no `Access-Control-*` header is ever sent).
 *
 * `/webhooks/*` are exempt: platforms sign their requests (secret token, signature) and post from their
 * own hosts, with their own content types.
 */
export function sameOriginGuard(options: SameOriginOptions): MiddlewareHandler {
  const names = allowedHostNames(options);
  const list = [...names].join(', ');
  return async (c, next) => {
    if (c.req.path.startsWith('/webhooks/')) return next();
    const host = c.req.header('host') ?? '';
    const name = hostName(host);
    if (!name || (!names.has(name) && !isLoopbackV4(name))) {
      return refuse(c, `Host "${host}" is not a name of this gateway (${list}); if it is yours, add it to gateway.allowedHosts.`, 'forbidden_host');
    }
    if (!STATE_CHANGING.has(c.req.method)) return next();
    const site = c.req.header('sec-fetch-site');
    if (site && site !== 'same-origin' && site !== 'none') {
      return refuse(c, 'Cross-site requests are refused: this gateway has no auth token, so it only takes requests from its own pages and from programs.', 'cross_site_request');
    }
    const origin = c.req.header('origin');
    if (origin !== undefined) {
      let originHost = '';
      try {
        originHost = new URL(origin).host.toLowerCase();
      } catch { /* "null" and other opaque origins */ }
      if (originHost !== host.trim().toLowerCase()) {
        return refuse(c, `Origin "${origin}" is not this gateway: cross-site requests are refused (set gateway.authToken to take authenticated requests from anywhere).`, 'cross_site_request');
      }
      return next();
    }
    const contentType = c.req.header('content-type');
    if (contentType !== undefined && !isJson(contentType)) {
      return refuse(c, `A request that changes something must send JSON (Content-Type: application/json), not ${contentType.split(';')[0]}.`, 'json_required');
    }
    return next();
  };
}

import { createReadStream } from 'node:fs';
import type { Context } from 'hono';
import type { MediaStore } from '../media/media-store.ts';
import type { HttpApp } from './app.ts';
import { jsonError } from './http-error.ts';
import { safeFileName, type MediaUploadDeps } from './media-upload.ts';

/** What `GET /media/:sha256` serves from. */
export interface MediaRouteDeps {
  media: MediaStore;
  /** `Cache-Control` max-age of a served file (seconds; default a year: the bytes behind a hash never change). */
  maxAgeSeconds?: number;
}

const SHA256 = /^[0-9a-f]{64}$/;
const MIME = /^[a-z0-9][\w!#$&^.+-]{0,126}\/[a-z0-9][\w!#$&^.+-]{0,126}$/;

/** The link of a stored file: `/media/<sha256>?name=<name>` (the name only says what to call it). */
export function mediaLink(sha256: string, name?: string): string {
  return `/media/${sha256}${name ? `?name=${encodeURIComponent(name)}` : ''}`;
}

/** `Content-Disposition` with an ASCII `filename` and the exact name as RFC 5987 `filename*`. */
function disposition(kind: 'inline' | 'attachment', name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/[\\"%;]/g, '_');
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name).replace(/['()*]/g, (ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase()}`)}`;
}

/**
 * `GET /media/:sha256[?name=…]`: a file of the media store (web chat uploads, API images, files the agent
 * sent), for the web chat page and the dashboard. Served under the gateway's own auth like every route (the
 * bearer token or the dashboard's cookie; no token: loopback with the same-origin checks), to any caller so
 * authenticated: a file is named by the SHA-256 of its bytes, which nobody can guess without having them.
 * Images are `inline`, anything else an `attachment`; `nosniff` and `Content-Security-Policy: sandbox`, so a
 * stored SVG or HTML never runs script in the gateway's origin; 404 for an unknown or malformed hash.
 */
export function mountMediaRoutes(deps: MediaRouteDeps): (app: HttpApp) => void {
  const maxAge = deps.maxAgeSeconds ?? 365 * 86_400;
  return (app) => {
    app.get('/media/:sha256', async (c: Context) => {
      const sha256 = c.req.param('sha256') ?? '';
      // Another site may not embed or link what only this gateway's pages show.
      const site = c.req.header('sec-fetch-site');
      if (site === 'cross-site' || site === 'same-site') return jsonError(c, 403, 'Stored media is served to this gateway\'s own pages only.', 'cross_site_request');
      const notFound = () => jsonError(c, 404, `No stored media ${sha256.slice(0, 64)}.`, 'media_not_found');
      if (!SHA256.test(sha256)) return notFound();
      const etag = `"${sha256}"`;
      const stat = await deps.media.stat(sha256);
      if (!stat) return notFound();
      const mime = MIME.test(stat.mime) ? stat.mime : 'application/octet-stream';
      const name = safeFileName(c.req.query('name'), sha256.slice(0, 12));
      const headers: Record<string, string> = {
        'content-type': mime,
        'content-disposition': disposition(mime.startsWith('image/') ? 'inline' : 'attachment', name),
        'x-content-type-options': 'nosniff',
        'content-security-policy': 'sandbox; default-src \'none\'; img-src \'self\'; media-src \'self\'; style-src \'unsafe-inline\'',
        'cross-origin-resource-policy': 'same-origin',
        'referrer-policy': 'no-referrer',
        'cache-control': `private, max-age=${maxAge}, immutable`,
        etag,
      };
      if (c.req.header('if-none-match') === etag) return c.body(null, 304, headers);
      const bytes = await deps.media.get(sha256);
      if (!bytes) return notFound();
      return c.body(bytes as Uint8Array<ArrayBuffer>, 200, { ...headers, 'content-length': String(bytes.length) });
    });
  };
}

/** A reply's file as the routes get it: in the media store (`sha256`) or still only on disk (`path`). */
export interface ReplyFile {
  name: string;
  mime: string;
  size: number;
  sha256?: string;
  path?: string;
}

/** A reply's file as a page gets it: its link when it is in the media store (never its path). */
export interface LinkedFile {
  name: string;
  mime: string;
  size: number;
  sha256?: string;
  url?: string;
}

/**
 * Links a reply's files for a page: `/media/<sha256>?name=…`. A file not yet in the store is stored from its
 * path first (within `maxBytes`); one that cannot be (no store, gone, too large) is listed without a link.
 */
export async function linkFiles(files: readonly ReplyFile[] | undefined, uploads: MediaUploadDeps | undefined): Promise<LinkedFile[]> {
  const linked: LinkedFile[] = [];
  for (const file of files ?? []) {
    const name = safeFileName(file.name);
    let sha256 = file.sha256 && SHA256.test(file.sha256) ? file.sha256 : undefined;
    if (!sha256 && file.path && uploads) {
      sha256 = await uploads.store.put(createReadStream(file.path), { mime: file.mime, maxBytes: uploads.maxBytes }).then((s) => s.sha256, () => undefined);
    }
    linked.push({ name, mime: file.mime, size: file.size, ...(sha256 ? { sha256, url: mediaLink(sha256, name) } : {}) });
  }
  return linked;
}

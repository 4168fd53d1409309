import { setImmediate as nextLoopTurn } from 'node:timers/promises';
import { z } from 'zod';
import type { MediaConfig } from '../config/media.ts';
import { BadRequestError, SwitchboardError } from '../core/errors.ts';
import type { Attachment } from '../core/message.ts';
import type { MediaStore, StoredMedia } from '../media/media-store.ts';

/** Most attachments one web chat message (or one API user message's images) may carry. */
export const MAX_ATTACHMENTS = 10;
/** Base64 characters decoded at a time (a multiple of 4): about a millisecond of work, then the event loop runs. */
const CHUNK_CHARS = 1 << 20;
/** Room in a media route's body for the JSON around the attachments (names, text, history of an API request). */
const JSON_ALLOWANCE = 64 * 1024;

/** An attachment over `media.maxBytes` (HTTP 413): refused before anything is decoded or stored. */
export class AttachmentTooLargeError extends SwitchboardError {
  constructor(message: string) {
    super('attachment_too_large', message, { status: 413 });
  }
}

/** A body over `gateway.maxBodyBytes` once its attachments are left out (HTTP 413, as for any other route). */
export class BodyTooLargeError extends SwitchboardError {
  constructor(maxBodyBytes: number) {
    super('body_too_large', `The request body is larger than gateway.maxBodyBytes (${maxBodyBytes} bytes), not counting its attachments.`, { status: 413 });
  }
}

/**
 * The media routes take bodies larger than `gateway.maxBodyBytes` for their attachments only: the rest of a body
 * (its text) is held to that limit as on every other route. Measured from `Content-Length` (a chunked body is held
 * to the route's own limit).
 */
export function checkTextBytes(contentLength: string | undefined, attachmentChars: number, maxBodyBytes: number | undefined): void {
  const length = Number(contentLength);
  if (maxBodyBytes === undefined || !Number.isFinite(length)) return;
  if (length - attachmentChars > maxBodyBytes) throw new BodyTooLargeError(maxBodyBytes);
}

/** What the upload routes store media with; `src/main.ts` passes the media store and `config.media`. */
export interface MediaUploadDeps {
  store: MediaStore;
  maxBytes: number;
}

/** One upload as the request gave it: base64 bytes, a name and a content type, both as the client claims. */
export interface Upload {
  name?: string;
  mime?: string;
  dataBase64: string;
  /** Where it was in the request (`attachments[2]`), for error messages. */
  field: string;
}

/** A stored upload and the attachment that hands it to the runtime. */
export interface StoredUpload {
  stored: StoredMedia;
  name: string;
  attachment: Attachment;
}

/**
 * The body limit of a route that takes media: {@link MAX_ATTACHMENTS} files of `maxBytes` each, base64-encoded
 * (4/3 of their size), plus the route's usual JSON. Bodies over it are refused by `Content-Length` before they
 * are read. Note: a body near the limit is parsed as one JSON text (hundreds of ms per 20 MB on the event loop).
 */
export function mediaBodyLimit(maxBodyBytes: number, maxBytes: number, maxAttachments = MAX_ATTACHMENTS): number {
  return maxBodyBytes + JSON_ALLOWANCE + Math.ceil((maxBytes * maxAttachments) / 3) * 4;
}

/**
 * `createHttpApp`'s `bodyLimits` for the routes that take media: `/webchat/messages` and `/v1/chat/completions`.
 * The attachments of one message together stay within `media.maxBytes`: a JSON body is parsed in one piece on the
 * event loop (some 200 ms for 27 MB), so ten files of the maximum size in one body would stall every chat for seconds.
 */
export function mediaBodyLimits(maxBodyBytes: number, media: Pick<MediaConfig, 'maxBytes'>): Record<string, number> {
  const limit = mediaBodyLimit(maxBodyBytes, media.maxBytes, 1);
  return { '/webchat/messages': limit, '/v1/chat/completions': limit };
}

/**
 * A file name safe to store, show and put in a header: the last path segment, without control, bidi or
 * reserved characters and leading dots, at most 200 characters; `fallback` when nothing is left.
 */
export function safeFileName(raw: string | undefined, fallback = 'file'): string {
  const last = (raw ?? '').split(/[\\/]/).pop() ?? '';
  const clean = last.normalize('NFC').replace(/[\u0000-\u001f\u007f-\u009f"<>:|?*\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, '_')
    .replace(/^[.\s]+/, '').trim();
  const cut = Array.from(clean).slice(0, 200).join('').trim();
  return cut || fallback;
}

/** A content type without parameters, lowercase; empty → `application/octet-stream`; malformed → 400. */
export function normalizeMime(raw: string | undefined, field: string): string {
  const type = (raw ?? '').split(';')[0]!.trim().toLowerCase();
  if (!type) return 'application/octet-stream';
  if (!/^[a-z0-9][\w!#$&^.+-]{0,126}\/[a-z0-9][\w!#$&^.+-]{0,126}$/.test(type)) {
    throw new BadRequestError(`${field}.mime "${type.slice(0, 80)}" is not a content type (like image/png).`, 'invalid_mime');
  }
  return type;
}

/** The attachment kind of a content type: image, audio, video, else file. */
export function attachmentType(mime: string): Attachment['type'] {
  if (mime.startsWith('image/')) return 'image';
  if (mime.startsWith('audio/')) return 'audio';
  if (mime.startsWith('video/')) return 'video';
  return 'file';
}

/** The attachment of stored bytes: the runtime takes them from the store by `sha256`. */
export function attachmentOf(stored: StoredMedia, name: string): Attachment {
  return { type: attachmentType(stored.mime), fileId: `media:${stored.sha256}`, sha256: stored.sha256, name, mimeType: stored.mime, size: stored.size };
}

/** Bytes a base64 text decodes to (padding optional); undefined when no base64 text has its length. */
export function base64Size(data: string): number | undefined {
  let end = data.length;
  let padding = 0;
  while (padding < 2 && end > 0 && data.charCodeAt(end - 1) === 61 /* = */) {
    end--;
    padding++;
  }
  if (end % 4 === 1 || (padding > 0 && (end + padding) % 4 !== 0)) return undefined;
  return Math.floor((end * 3) / 4);
}

const invalidBase64 = (field: string) =>
  new BadRequestError(`${field}.dataBase64 is not valid base64 (A-Z a-z 0-9 + / with = padding, no spaces or line breaks).`, 'invalid_base64');

/**
 * Decodes base64 a chunk at a time, the event loop running between chunks. Node's decoder skips characters
 * it does not know, so a chunk that decodes to fewer bytes than its length promises held some: invalid.
 * (Node also reads the URL-safe alphabet, `-` and `_`; those are taken.)
 */
async function decodeBase64(data: string, field: string): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  for (let at = 0; at < data.length; at += CHUNK_CHARS) {
    if (at > 0) await nextLoopTurn();
    const piece = data.slice(at, at + CHUNK_CHARS);
    const last = at + CHUNK_CHARS >= data.length;
    // Padding only at the very end.
    const expected = last ? base64Size(piece) : (piece.length / 4) * 3;
    const bytes = Buffer.from(piece, 'base64');
    if (expected === undefined || bytes.length !== expected) throw invalidBase64(field);
    chunks.push(bytes);
  }
  return chunks;
}

/**
 * Checks, decodes and stores uploads: first every size (from the base64 length: nothing over `maxBytes` is
 * decoded), then every decoding, then the store; so a refused request (400 bad base64 or mime, 413 too large)
 * stores nothing. Names are made safe ({@link safeFileName}).
 */
export async function storeUploads(uploads: readonly Upload[], deps: MediaUploadDeps, signal?: AbortSignal): Promise<StoredUpload[]> {
  if (uploads.length > MAX_ATTACHMENTS) throw new BadRequestError(`At most ${MAX_ATTACHMENTS} attachments per message; this one has ${uploads.length}.`, 'too_many_attachments');
  const checked = uploads.map((upload, i) => {
    const size = base64Size(upload.dataBase64);
    if (size === undefined) throw invalidBase64(upload.field);
    if (size === 0) throw new BadRequestError(`${upload.field} is empty.`, 'empty_attachment');
    const name = safeFileName(upload.name, `attachment-${i + 1}`);
    if (size > deps.maxBytes) throw new AttachmentTooLargeError(`${upload.field} ("${name}", ${size} bytes) is larger than media.maxBytes (${deps.maxBytes} bytes).`);
    return { upload, name, mime: normalizeMime(upload.mime, upload.field) };
  });
  const decoded: Buffer[][] = [];
  for (const { upload } of checked) decoded.push(await decodeBase64(upload.dataBase64, upload.field));
  const stored: StoredUpload[] = [];
  for (const [i, { name, mime }] of checked.entries()) {
    const chunks = decoded[i]!;
    decoded[i] = [];
    const media = await deps.store.put(fromChunks(chunks), { mime, maxBytes: deps.maxBytes, ...(signal ? { signal } : {}) });
    stored.push({ stored: media, name, attachment: attachmentOf(media, name) });
  }
  return stored;
}

async function* fromChunks(chunks: Buffer[]): AsyncGenerator<Uint8Array> {
  for (const chunk of chunks) yield chunk;
}

const webchatAttachment = z.object({
  name: z.string().max(4096).optional(),
  mime: z.string().max(1024).optional(),
  dataBase64: z.string(),
});

/** The `attachments` field of `POST /webchat/messages`: `[{ name, mime, dataBase64 }]`; a bad one is a 400 that names it. */
export function webchatUploads(raw: unknown): Upload[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new BadRequestError('Field "attachments" must be an array of { name, mime, dataBase64 }.', 'invalid_attachments');
  if (raw.length > MAX_ATTACHMENTS) throw new BadRequestError(`At most ${MAX_ATTACHMENTS} attachments per message; this one has ${raw.length}.`, 'too_many_attachments');
  return raw.map((item, i) => {
    const parsed = webchatAttachment.safeParse(item);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = ['attachments', i, ...(issue?.path ?? [])].map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').slice(1);
      throw new BadRequestError(`Invalid ${where}: ${issue?.message ?? 'bad value'} (each attachment is { name, mime, dataBase64 }).`, 'invalid_attachments');
    }
    return { ...parsed.data, field: `attachments[${i}]` };
  });
}

import { MediaFetchError } from './errors.ts';
import type { MediaDownload } from './message.ts';

/**
 * The chunks of a download a channel streams from its platform (SPEC §15): a stream that breaks off is
 * `download_failed`, one that runs past `maxBytes` (whatever it announced) `too_large`, and one stopped by `signal`
 * (the deadline, a shutdown) `timeout`. The connection is released however the reading ends. `what` names the
 * file in messages ("The Telegram file"); `clean` scrubs a reason before it goes into one (a URL with a token).
 */
export async function* guardedDownload(
  body: ReadableStream<Uint8Array>,
  options: { maxBytes: number; signal: AbortSignal; what: string; clean?: (text: string) => string },
): AsyncIterable<Uint8Array> {
  const { maxBytes, signal, what } = options;
  const clean = options.clean ?? ((text: string) => text);
  let received = 0;
  const reader = body.getReader();
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (error) {
        if (signal.aborted) throw downloadStopped(what);
        throw new MediaFetchError('download_failed', `${what} download broke off after ${received} bytes (${clean(networkReason(error))}).`);
      }
      if (chunk.done) return;
      received += chunk.value.byteLength;
      if (received > maxBytes) throw new MediaFetchError('too_large', `${what} is over the limit of ${maxBytes} bytes; the download was stopped.`);
      yield chunk.value;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** A download stopped by its signal (the deadline or a shutdown). */
export function downloadStopped(what: string): MediaFetchError {
  return new MediaFetchError('timeout', `${what} download was stopped (deadline or shutdown).`);
}

/** A network error's reason: its cause's code or message (undici puts the detail there). */
export function networkReason(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } } | undefined)?.cause;
  return cause?.code ?? cause?.message ?? (error as Error)?.message ?? String(error);
}

/** `what` (e.g. "The Slack file") announced as larger than `maxBytes`: not downloaded. */
export function tooLargeDownload(what: string, size: number, maxBytes: number): MediaFetchError {
  return new MediaFetchError('too_large', `${what} is ${size} bytes, over the limit of ${maxBytes}; not downloaded.`);
}

/**
 * The download a platform's final answer opens: a non-2xx answer is `download_failed` (`refused` says it, with the
 * status), a `Content-Length` over `maxBytes` is `too_large` before anything is read; else its guarded body, its size
 * (the header's, else the platform's `size`) and its content type (else `mime`).
 */
export async function downloadOf(
  response: Response,
  options: { maxBytes: number; signal: AbortSignal; what: string; refused: (status: number) => string; size?: number; mime?: string; clean?: (text: string) => string },
): Promise<MediaDownload> {
  const { maxBytes, what } = options;
  if (response.status < 200 || response.status > 299 || !response.body) {
    await response.body?.cancel().catch(() => undefined);
    throw new MediaFetchError('download_failed', options.refused(response.status));
  }
  const length = Number(response.headers.get('content-length') ?? Number.NaN);
  if (Number.isFinite(length) && length > maxBytes) {
    await response.body.cancel().catch(() => undefined);
    throw tooLargeDownload(what, length, maxBytes);
  }
  const size = Number.isFinite(length) ? length : options.size;
  const mime = response.headers.get('content-type') ?? options.mime;
  return {
    body: guardedDownload(response.body, { maxBytes, signal: options.signal, what, ...(options.clean ? { clean: options.clean } : {}) }),
    ...(size !== undefined ? { size } : {}),
    ...(mime ? { mime } : {}),
  };
}

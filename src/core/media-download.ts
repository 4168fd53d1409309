import { MediaFetchError } from './errors.ts';

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

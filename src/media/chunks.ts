/** Largest piece handed on: hashing or copying a bigger one at once holds the event loop too long. */
export const MAX_PIECE = 256 * 1024;

function* split(chunk: Uint8Array): Generator<Uint8Array> {
  if (chunk.length <= MAX_PIECE) {
    yield chunk;
    return;
  }
  for (let offset = 0; offset < chunk.length; offset += MAX_PIECE) yield chunk.subarray(offset, offset + MAX_PIECE);
}

/**
 * The chunks of `body` in pieces of at most {@link MAX_PIECE} bytes (a single buffer is cut the same way), ending
 * with the signal's reason as soon as it aborts, even while the body waits for its next chunk. An early exit
 * returns the body's iterator (releasing its socket).
 */
export async function* abortableChunks(body: AsyncIterable<Uint8Array> | Uint8Array, signal: AbortSignal | undefined): AsyncGenerator<Uint8Array> {
  signal?.throwIfAborted();
  if (body instanceof Uint8Array) {
    for (const piece of split(body)) {
      signal?.throwIfAborted();
      yield piece;
    }
    return;
  }
  const iterator = body[Symbol.asyncIterator]();
  let aborted: Promise<never> | undefined;
  let onAbort: (() => void) | undefined;
  if (signal) {
    aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    aborted.catch(() => undefined);
  }
  let done = false;
  try {
    while (true) {
      signal?.throwIfAborted();
      const next = aborted ? await Promise.race([iterator.next(), aborted]) : await iterator.next();
      if (next.done) {
        done = true;
        return;
      }
      yield* split(next.value);
    }
  } finally {
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    if (!done) void Promise.resolve(iterator.return?.()).catch(() => undefined);
  }
}

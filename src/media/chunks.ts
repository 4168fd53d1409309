/**
 * The chunks of `body` (a single buffer is one chunk), ending with the signal's reason as soon as it aborts,
 * even while the body waits for its next chunk. An early exit returns the body's iterator (releasing its socket).
 */
export async function* abortableChunks(body: AsyncIterable<Uint8Array> | Uint8Array, signal: AbortSignal | undefined): AsyncGenerator<Uint8Array> {
  signal?.throwIfAborted();
  if (body instanceof Uint8Array) {
    yield body;
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
      yield next.value;
    }
  } finally {
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    if (!done) void Promise.resolve(iterator.return?.()).catch(() => undefined);
  }
}

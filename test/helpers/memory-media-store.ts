import { createHash } from 'node:crypto';
import { MediaFetchError } from '../../src/core/errors.ts';
import type { MediaStore, StoredMedia } from '../../src/media/media-store.ts';

/** A {@link MediaStore} in memory, for HTTP tests: content-addressed like the real one, counting its puts. */
export class MemoryMediaStore implements MediaStore {
  readonly files = new Map<string, { bytes: Buffer; media: StoredMedia }>();
  puts = 0;

  async put(body: AsyncIterable<Uint8Array> | Uint8Array, options: { mime: string; maxBytes: number; signal?: AbortSignal; now?: number }): Promise<StoredMedia> {
    this.puts++;
    const hash = createHash('sha256');
    const parts: Buffer[] = [];
    let size = 0;
    const take = (chunk: Uint8Array) => {
      options.signal?.throwIfAborted();
      size += chunk.length;
      if (size > options.maxBytes) throw new MediaFetchError('too_large', `over ${options.maxBytes} bytes`);
      hash.update(chunk);
      parts.push(Buffer.from(chunk));
    };
    if (body instanceof Uint8Array) take(body);
    else for await (const chunk of body) take(chunk);
    const sha256 = hash.digest('hex');
    const media: StoredMedia = { sha256, size, mime: options.mime, storedAt: options.now ?? Date.now() };
    this.files.set(sha256, { bytes: Buffer.concat(parts), media });
    return media;
  }

  async get(sha256: string): Promise<Buffer | undefined> {
    return this.files.get(sha256)?.bytes;
  }

  async stat(sha256: string): Promise<StoredMedia | undefined> {
    return this.files.get(sha256)?.media;
  }

  async sweep(): Promise<{ removed: number; bytes: number }> {
    return { removed: 0, bytes: 0 };
  }
}

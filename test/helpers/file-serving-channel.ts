import type { Attachment, MediaDownload } from '../../src/core/message.ts';
import { MediaFetchError } from '../../src/core/errors.ts';
import { TestChannel } from './test-channel.ts';

/** A channel whose platform serves files: `files[fileId]` is what `fetchMedia` streams. */
export class FileServingChannel extends TestChannel {
  readonly files = new Map<string, Buffer | 'fail' | 'hang'>();
  readonly fetched: string[] = [];

  async fetchMedia(attachment: Attachment, options: { signal: AbortSignal; maxBytes: number }): Promise<MediaDownload> {
    this.fetched.push(attachment.fileId);
    const file = this.files.get(attachment.fileId);
    if (file === undefined || file === 'fail') throw new MediaFetchError('download_failed', 'the platform answered 404');
    if (file === 'hang') {
      return { body: (async function* hang() {
        yield new Uint8Array(10);
        await new Promise((_, reject) => options.signal.addEventListener('abort', () => reject(options.signal.reason as Error), { once: true }));
      })() };
    }
    return { body: (async function* chunks() { for (let i = 0; i < file.length; i += 64 * 1024) yield file.subarray(i, i + 64 * 1024); })(), size: file.length };
  }
}


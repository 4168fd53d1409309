import type { MediaRecord } from '../../core/message.ts';
import type { MediaStore } from '../../media/media-store.ts';
import type { ChatImage } from '../../providers/types.ts';
import type { TranscriptEntry } from '../../sessions/transcript.ts';
import { imageTokens } from '../../tokens/image-tokens.ts';

/** Tokens assumed for an image passed through by URL, whose size the gateway never learns (a 1024×1024 image). */
const UNKNOWN_SIZE_TOKENS = imageTokens(1024, 1024);

/**
 * The images requests carry (SPEC §15), as data URLs of the downscaled copies in the media store, loaded once and
 * kept in memory up to `maxBytes` (least recently used out): every request of a session carries its images again.
 * {@link ImageCache.imageOf} is one stable function, so rendered user messages stay cached across requests.
 */
export class ImageCache {
  private readonly store: MediaStore | undefined;
  private readonly maxBytes: number;
  private readonly images = new Map<string, ChatImage>();
  private bytes = 0;

  constructor(options: { store?: MediaStore; maxBytes?: number }) {
    this.store = options.store;
    this.maxBytes = options.maxBytes ?? 128 * 1024 * 1024;
  }

  /** Loads the images of `history`'s user entries not loaded yet (after `from`, the last compaction's index). */
  async load(history: readonly TranscriptEntry[], from = 0): Promise<void> {
    for (let i = Math.max(0, from); i < history.length; i++) {
      const e = history[i] as TranscriptEntry;
      if (e.type !== 'message' || !e.media) continue;
      for (const record of e.media) {
        if (record.as !== 'image' || !record.modelSha256) continue;
        const hit = this.images.get(record.modelSha256);
        if (hit) {
          this.images.delete(record.modelSha256);
          this.images.set(record.modelSha256, hit);
          continue;
        }
        const data = await this.store?.get(record.modelSha256);
        if (!data) continue;
        this.put(record.modelSha256, {
          url: `data:${record.modelMime ?? record.mime};base64,${data.toString('base64')}`,
          tokens: imageTokens(record.modelWidth ?? record.width ?? 1024, record.modelHeight ?? record.height ?? 1024),
          ...(record.modelWidth ? { width: record.modelWidth } : {}), ...(record.modelHeight ? { height: record.modelHeight } : {}),
        });
      }
    }
  }

  /** The image a record shows, when loaded (or passed through by URL); undefined: the model gets its line. */
  readonly imageOf = (record: MediaRecord): ChatImage | undefined => {
    if (record.url) return { url: record.url, tokens: record.modelWidth && record.modelHeight ? imageTokens(record.modelWidth, record.modelHeight) : UNKNOWN_SIZE_TOKENS };
    return record.modelSha256 ? this.images.get(record.modelSha256) : undefined;
  };

  private put(sha256: string, image: ChatImage): void {
    this.images.set(sha256, image);
    this.bytes += image.url.length;
    for (const [key, old] of this.images) {
      if (this.bytes <= this.maxBytes || key === sha256) break;
      this.images.delete(key);
      this.bytes -= old.url.length;
    }
  }
}

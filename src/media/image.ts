import pLimit from 'p-limit';
import sharp, { type Metadata, type OutputInfo } from 'sharp';
import { MediaFetchError } from '../core/errors.ts';

/** An image made ready for the model (SPEC §15). */
export interface PreparedImage {
  data: Buffer;
  /** `image/png` (images with transparency) or `image/jpeg`. */
  mime: string;
  /** Size after orientation and downscaling. */
  width: number;
  height: number;
  /** Size of the original, upright (after its EXIF orientation). */
  originalWidth: number;
  originalHeight: number;
}

/** Options of {@link prepareImage}. */
export interface PrepareImageOptions {
  /** Longest side of the result (pixels); smaller images are never enlarged. */
  maxSide: number;
  signal?: AbortSignal;
}

/** Most pixels an input may declare: more is a decompression bomb (a few KB of PNG claiming gigapixels). */
export const MAX_INPUT_PIXELS = 100_000_000;
/** JPEG quality of the result. */
export const JPEG_QUALITY = 85;

/**
 * One image is prepared at a time, on one libvips thread: decoding a photo takes some 250 ms of CPU, and 16 chats
 * sending photos at once would otherwise take every core from the event loop (measured: 300-600 ms stalls with
 * 16 concurrent images on 2 cores) and finish together, their requests then serialized back to back.
 */
const oneAtATime = pLimit(1);
sharp.concurrency(1);

/** Formats decoded. SVG (which can reference files), PDF, raw and the like are refused. */
const ACCEPTED_FORMATS = new Set(['jpeg', 'png', 'gif', 'webp', 'tiff', 'heif', 'avif']);

function undecodable(message: string, cause?: unknown): MediaFetchError {
  return new MediaFetchError('undecodable', message, { cause });
}

/**
 * Decodes an image with sharp (libvips, on libuv's thread pool: the event loop stays free), turns it upright
 * by its EXIF orientation, keeps the first frame of an animation, downscales it to at most `maxSide` on its
 * longer side and encodes it as PNG when it has an alpha channel, else as JPEG (quality 85). Inputs claiming more
 * than {@link MAX_INPUT_PIXELS} pixels are refused before they are decoded. Anything that is not a decodable image
 * of an accepted format rejects with `MediaFetchError('undecodable')`, never another error; an abort rejects with
 * the signal's reason (libvips finishes the image it is on; its result is dropped).
 */
export function prepareImage(bytes: Buffer, options: PrepareImageOptions): Promise<PreparedImage> {
  return oneAtATime(() => prepareNow(bytes, options));
}

async function prepareNow(bytes: Buffer, options: PrepareImageOptions): Promise<PreparedImage> {
  const { signal } = options;
  signal?.throwIfAborted();
  const maxSide = Math.max(1, Math.floor(options.maxSide));
  const input = { limitInputPixels: MAX_INPUT_PIXELS, sequentialRead: true, pages: 1, page: 0 } as const;
  let metadata: Metadata;
  try {
    metadata = await sharp(bytes, input).metadata();
  } catch (error) {
    throw undecodable(`The image could not be read: ${(error as Error)?.message ?? String(error)}`, error);
  }
  signal?.throwIfAborted();
  if (!metadata.format || !ACCEPTED_FORMATS.has(metadata.format)) throw undecodable(`Images of format ${metadata.format ?? 'unknown'} are not accepted.`);
  const { width, height } = metadata.autoOrient ?? metadata;
  if (!width || !height) throw undecodable('The image has no size.');
  // With one page asked for, metadata describes an animation's first frame, the only one decoded.
  if (width * height > MAX_INPUT_PIXELS) throw undecodable(`The image claims ${width}×${height} pixels, more than ${MAX_INPUT_PIXELS}.`);
  const alpha = metadata.hasAlpha === true;
  let result: { data: Buffer; info: OutputInfo };
  try {
    let pipeline = sharp(bytes, input)
      .rotate()
      .resize({ width: maxSide, height: maxSide, fit: 'inside', withoutEnlargement: true });
    pipeline = alpha ? pipeline.png({ compressionLevel: 6 }) : pipeline.flatten({ background: '#ffffff' }).jpeg({ quality: JPEG_QUALITY, mozjpeg: false });
    result = await pipeline.toBuffer({ resolveWithObject: true });
  } catch (error) {
    throw undecodable(`The image could not be decoded: ${(error as Error)?.message ?? String(error)}`, error);
  }
  signal?.throwIfAborted();
  return {
    data: result.data,
    mime: alpha ? 'image/png' : 'image/jpeg',
    width: result.info.width,
    height: result.info.height,
    originalWidth: width,
    originalHeight: height,
  };
}

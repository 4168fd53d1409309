import { crc32, deflateSync } from 'node:zlib';
import sharp from 'sharp';

/** A noisy (so large: about 5 MB) JPEG photo of the given size. */
export function noisyJpeg(width: number, height: number, quality = 80): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 30 } } })
    .jpeg({ quality })
    .toBuffer();
}

/** A flat JPEG (small and quick to make). */
export function flatJpeg(width: number, height: number, options: { orientation?: number } = {}): Promise<Buffer> {
  const image = sharp({ create: { width, height, channels: 3, background: { r: 200, g: 30, b: 30 } } }).jpeg();
  return (options.orientation ? image.withMetadata({ orientation: options.orientation }) : image).toBuffer();
}

/** A PNG with a half-transparent alpha channel. */
export function alphaPng(width: number, height: number): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 4, background: { r: 0, g: 100, b: 200, alpha: 0.5 } } }).png().toBuffer();
}

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body) >>> 0);
  return Buffer.concat([length, body, crc]);
}

/** A valid-looking PNG of a few hundred bytes whose header claims `width`×`height` pixels (a decompression bomb). */
export function pngBomb(width = 100_000, height = 100_000): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB, no interlace
  // The start of a (highly compressible) image of zeros.
  const idat = deflateSync(Buffer.alloc(1024 * 1024));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', idat), chunk('IEND', Buffer.alloc(0))]);
}

/** An animated GIF of three 20×30 frames of different colours. */
export async function animatedGif(): Promise<Buffer> {
  const frame = (r: number) => sharp({ create: { width: 20, height: 30, channels: 3, background: { r, g: 0, b: 0 } } }).png().toBuffer();
  return sharp([await frame(250), await frame(100), await frame(10)], { join: { animated: true } }).gif().toBuffer();
}

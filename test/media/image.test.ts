import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { MediaFetchError } from '../../src/core/errors.ts';
import { MAX_INPUT_PIXELS, prepareImage } from '../../src/media/image.ts';
import { alphaPng, animatedGif, flatJpeg, noisyJpeg, pngBomb } from './image-fixtures.ts';
import { stallProbe } from './stall-probe.ts';

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(() => expect.fail('expected a rejection'), (error: unknown) => error);
}

describe('prepareImage', () => {
  let photo: Buffer;
  beforeAll(async () => {
    photo = await noisyJpeg(4000, 3000);
  }, 60_000);

  // A retry for a garbage collection of the test runner's heap; work that blocks the loop fails every try.
  it('downscales a 4000×3000 JPEG photo to 2048 on its long side, as JPEG, without stalling the event loop', { timeout: 60_000, retry: 2 }, async () => {
    // The probe runs a few ticks first, so what vitest does as a test starts is not counted.
    const probe = await stallProbe().settled();
    const started = performance.now();
    const image = await prepareImage(photo, { maxSide: 2048 });
    const ms = performance.now() - started;
    const stall = probe.stop();
    console.log(`prepareImage: ${(photo.length / 1024 / 1024).toFixed(1)} MB JPEG 4000×3000 → ${image.width}×${image.height} (${Math.round(image.data.length / 1024)} KB) in ${Math.round(ms)} ms; worst event-loop stall ${stall.toFixed(1)} ms of the main thread's own work (${probe.wall().toFixed(1)} ms wall-clock, scheduling included)`);
    expect(image).toMatchObject({ mime: 'image/jpeg', width: 2048, height: 1536, originalWidth: 4000, originalHeight: 3000 });
    const meta = await sharp(image.data).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['jpeg', 2048, 1536]);
    expect(image.data.length).toBeLessThan(photo.length);
    expect(stall).toBeLessThan(50);
  });

  it('never enlarges a small image', async () => {
    const image = await prepareImage(await flatJpeg(300, 200), { maxSide: 2048 });
    expect([image.width, image.height, image.originalWidth, image.originalHeight]).toEqual([300, 200, 300, 200]);
  });

  it('keeps PNG for an image with transparency, and its alpha', async () => {
    const image = await prepareImage(await alphaPng(3000, 1000), { maxSide: 1500 });
    expect(image).toMatchObject({ mime: 'image/png', width: 1500, height: 500 });
    const meta = await sharp(image.data).metadata();
    expect([meta.format, meta.hasAlpha]).toEqual(['png', true]);
  });

  it('turns an EXIF-rotated photo upright', async () => {
    // Stored 200×100 landscape, EXIF orientation 6 (rotate 90° clockwise to view): upright it is 100×200.
    const image = await prepareImage(await flatJpeg(200, 100, { orientation: 6 }), { maxSide: 2048 });
    expect([image.width, image.height, image.originalWidth, image.originalHeight]).toEqual([100, 200, 100, 200]);
    const meta = await sharp(image.data).metadata();
    expect([meta.width, meta.height]).toEqual([100, 200]);
    expect(meta.orientation ?? 1).toBe(1);
  });

  it('takes the first frame of an animated GIF', async () => {
    const image = await prepareImage(await animatedGif(), { maxSide: 2048 });
    expect([image.width, image.height, image.originalHeight]).toEqual([20, 30, 30]);
    const { data } = await sharp(image.data).raw().toBuffer({ resolveWithObject: true });
    expect(data[0]).toBeGreaterThan(200); // the first frame is the red one
    expect((await sharp(image.data).metadata()).pages ?? 1).toBe(1);
  });

  it('refuses corrupt bytes, a truncated JPEG, SVG and a PNG claiming 100k×100k pixels with MediaFetchError(undecodable), quickly', async () => {
    const truncated = (await flatJpeg(400, 300)).subarray(0, 300);
    const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><image href="file:///etc/passwd"/></svg>');
    for (const [label, bytes] of [['random', Buffer.from('definitely not an image at all')], ['empty', Buffer.alloc(0)], ['truncated', truncated], ['svg', svg]] as const) {
      const error = await rejection(prepareImage(bytes, { maxSide: 2048 }));
      expect(error, label).toBeInstanceOf(MediaFetchError);
      expect((error as MediaFetchError).reason, label).toBe('undecodable');
    }
    const bomb = pngBomb();
    expect(bomb.length).toBeLessThan(10_000);
    const started = performance.now();
    const error = await rejection(prepareImage(bomb, { maxSide: 2048 }));
    expect(error).toBeInstanceOf(MediaFetchError);
    expect((error as MediaFetchError).reason).toBe('undecodable');
    expect(performance.now() - started).toBeLessThan(2000);
    // Just under the limit is still an image (checks the limit is the guard, not the format).
    expect(MAX_INPUT_PIXELS).toBe(100_000_000);
  });

  it('rejects with the signal reason when aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await expect(prepareImage(await flatJpeg(10, 10), { maxSide: 100, signal: controller.signal })).rejects.toThrow('stop');
  });
});

import fc from 'fast-check';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MediaFetchError } from '../../src/core/errors.ts';
import { closePdfWorkers, documentText } from '../../src/media/document-text.ts';
import { prepareImage } from '../../src/media/image.ts';
import { sniffMime } from '../../src/media/sniff.ts';
import { makePdf } from './pdf-fixtures.ts';
import { stallProbe } from './stall-probe.ts';

const SEED = 280_028;
const RUNS = 2000;
const LABELS = ['image/jpeg', 'image/png', 'audio/ogg', 'application/pdf', 'text/plain'] as const;

interface Sample {
  kind: string;
  label: (typeof LABELS)[number];
  bytes: Buffer;
}

afterAll(() => closePdfWorkers());

describe('media fuzz: random and damaged files never crash and never stall the event loop', () => {
  let samples: Sample[];
  beforeAll(async () => {
    // Deterministic pixels (sharp's noise is not seeded), so the same seed always makes the same blobs.
    const pixels = Buffer.from(Array.from({ length: 64 * 48 * 3 }, (_, i) => (i * 7919) % 251));
    const jpeg = await sharp(pixels, { raw: { width: 64, height: 48, channels: 3 } }).jpeg().toBuffer();
    const png = await sharp({ create: { width: 40, height: 30, channels: 4, background: { r: 10, g: 20, b: 30, alpha: 0.5 } } }).png().toBuffer();
    const pdf = makePdf(['fuzz page one', 'fuzz page two']);
    const ogg = Buffer.concat([Buffer.from('OggS'), Buffer.alloc(24), Buffer.from('OpusHead')]);
    const reals = [jpeg, png, pdf, ogg];
    const headers = [jpeg.subarray(0, 20), png.subarray(0, 33), Buffer.from('%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\n'), ogg, Buffer.from('GIF89a'), Buffer.from('\xef\xbb\xbf', 'latin1')];
    const random = fc.uint8Array({ maxLength: 4096 }).map((b) => ({ kind: 'random', bytes: Buffer.from(b) }));
    const truncated = fc.tuple(fc.constantFrom(...reals.keys()), fc.double({ min: 0, max: 1, noNaN: true }))
      .map(([i, f]) => ({ kind: `truncated#${i}`, bytes: reals[i]!.subarray(0, Math.floor(reals[i]!.length * f)) }));
    const headed = fc.tuple(fc.constantFrom(...headers.keys()), fc.uint8Array({ maxLength: 8192 }))
      .map(([i, body]) => ({ kind: `header#${i}`, bytes: Buffer.concat([headers[i]!, body]) }));
    const mutated = fc.tuple(fc.constantFrom(...reals.keys()), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 12 }))
      .map(([i, flips]) => {
        const bytes = Buffer.from(reals[i]!);
        for (const [at, value] of flips) bytes[at % bytes.length] = value;
        return { kind: `mutated#${i}`, bytes };
      });
    const sample = fc.tuple(fc.oneof(random, truncated, headed, mutated), fc.constantFrom(...LABELS)).map(([s, label]) => ({ ...s, label }));
    samples = fc.sample(sample, { seed: SEED, numRuns: RUNS });
  }, 60_000);

  it(`${RUNS} seeded blobs through sniffMime, prepareImage and documentText: only success or MediaFetchError`, { timeout: 120_000 }, async () => {
    expect(samples).toHaveLength(RUNS);
    const crashes: string[] = [];
    const outcomes = new Map<string, number>();
    const count = (key: string) => outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    const settle = async (what: string, sample: Sample, index: number, run: () => Promise<unknown>) => {
      try {
        count(`${what}:${(await run()) === undefined ? 'none' : 'ok'}`);
      } catch (error) {
        if (error instanceof MediaFetchError) count(`${what}:${error.reason}`);
        else crashes.push(`#${index} ${sample.kind} ${sample.label} ${what}: ${String(error)}`);
      }
    };
    const probe = await stallProbe().settled();
    const started = performance.now();
    let next = 0;
    const worker = async () => {
      while (next < samples.length) {
        const index = next++;
        const sample = samples[index]!;
        try {
          sniffMime(sample.bytes.subarray(0, 64));
        } catch (error) {
          crashes.push(`#${index} sniffMime: ${String(error)}`);
        }
        await settle('image', sample, index, () => prepareImage(sample.bytes, { maxSide: 512 }));
        await settle('document', sample, index, () => documentText(sample.bytes, { mime: sample.label, name: 'fuzz', maxChars: 2000, timeoutMs: 3000 }));
      }
    };
    await Promise.all(Array.from({ length: 6 }, worker));
    const elapsed = performance.now() - started;
    const stall = probe.stop();
    console.log(`media fuzz: ${RUNS} blobs (seed ${SEED}) in ${(elapsed / 1000).toFixed(1)} s; worst event-loop stall ${stall.toFixed(1)} ms of the main thread's own work (${probe.wall().toFixed(1)} ms wall-clock, scheduling included); outcomes ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}`);
    expect(crashes).toEqual([]);
    expect(stall).toBeLessThanOrEqual(50);
    // The run exercised both paths: some images decoded, some PDFs read, some refused.
    expect(outcomes.get('image:ok')).toBeGreaterThan(0);
    expect(outcomes.get('image:undecodable')).toBeGreaterThan(0);
    expect(outcomes.get('document:undecodable')).toBeGreaterThan(0);
    expect(outcomes.get('document:ok')).toBeGreaterThan(0);
  });
});

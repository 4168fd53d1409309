import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MediaFetchError } from '../../src/core/errors.ts';
import { FileMediaStore } from '../../src/media/file-media-store.ts';
import { stallProbe } from './stall-probe.ts';

const DAY = 24 * 60 * 60 * 1000;
const NOW = Date.parse('2026-12-01T12:00:00Z');
const sha = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

async function* chunks(...parts: (string | Buffer)[]): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield Buffer.from(part);
}

describe('FileMediaStore', () => {
  let root: string;
  let dir: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'sb-media-'));
    dir = path.join(root, 'media');
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it('stores a stream content-addressed, and gives back its bytes and facts', async () => {
    const store = new FileMediaStore({ dir });
    const stored = await store.put(chunks('hello ', 'media ', 'world'), { mime: 'text/plain', maxBytes: 1024, now: NOW });
    expect(stored).toEqual({ sha256: sha('hello media world'), size: 17, mime: 'text/plain', storedAt: NOW });
    expect((await store.get(stored.sha256))?.toString()).toBe('hello media world');
    expect(await store.stat(stored.sha256)).toEqual(stored);
    // A second store on the same folder (a restart) sees it.
    expect(await new FileMediaStore({ dir }).stat(stored.sha256)).toEqual(stored);
    expect((await readdir(dir)).sort()).toEqual([stored.sha256, `${stored.sha256}.json`]);
    // A Uint8Array body works too.
    const single = await store.put(Buffer.from('one buffer'), { mime: 'application/octet-stream', maxBytes: 1024, now: NOW });
    expect(single.sha256).toBe(sha('one buffer'));
  });

  it('keeps one copy of the same bytes stored twice and refreshes its time', async () => {
    const store = new FileMediaStore({ dir });
    const first = await store.put(chunks('same'), { mime: 'image/png', maxBytes: 100, now: NOW - DAY });
    const second = await store.put(chunks('sa', 'me'), { mime: 'image/png', maxBytes: 100, now: NOW });
    expect(second.sha256).toBe(first.sha256);
    expect((await store.stat(first.sha256))?.storedAt).toBe(NOW);
    expect((await readdir(dir)).filter((n) => !n.endsWith('.json'))).toEqual([first.sha256]);
  });

  it('refuses a body over maxBytes with MediaFetchError(too_large) and keeps nothing, temp file included', async () => {
    const store = new FileMediaStore({ dir });
    let pulled = 0;
    async function* endless(): AsyncGenerator<Uint8Array> {
      for (;;) {
        pulled++;
        yield Buffer.alloc(1000, 1);
      }
    }
    const error = await store.put(endless(), { mime: 'video/mp4', maxBytes: 4500 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MediaFetchError);
    expect((error as MediaFetchError).reason).toBe('too_large');
    expect(pulled).toBe(5); // stopped at the chunk that passed the limit
    expect(await readdir(dir)).toEqual([]);
    const exact = await store.put(Buffer.alloc(4500), { mime: 'x/y', maxBytes: 4500 });
    expect(exact.size).toBe(4500);
  });

  it('stops at once when aborted mid-stream, even while the body waits, and keeps nothing', async () => {
    const store = new FileMediaStore({ dir });
    const controller = new AbortController();
    let returned = false;
    let waiting!: () => void;
    const bodyWaits = new Promise<void>((resolve) => (waiting = resolve));
    const body: AsyncIterable<Uint8Array> = {
      [Symbol.asyncIterator]() {
        let n = 0;
        return {
          next: () => {
            if (n++ === 0) return Promise.resolve({ done: false, value: Buffer.from('first chunk') });
            waiting();
            return new Promise<IteratorResult<Uint8Array>>(() => undefined); // a stalled download
          },
          return: () => {
            returned = true;
            return Promise.resolve({ done: true, value: undefined });
          },
        };
      },
    };
    const pending = store.put(body, { mime: 'audio/ogg', maxBytes: 1_000_000, signal: controller.signal });
    await bodyWaits;
    expect((await readdir(dir)).filter((n) => n.startsWith('.tmp-'))).toHaveLength(1); // the first chunk is on disk
    controller.abort(new Error('download deadline'));
    await expect(pending).rejects.toThrow('download deadline');
    expect(returned).toBe(true);
    expect(await readdir(dir)).toEqual([]);
  });

  it('answers undefined for invalid names: no path traversal, no other files', async () => {
    const store = new FileMediaStore({ dir });
    await writeFile(path.join(root, 'secret'), 'top secret');
    const stored = await store.put(chunks('x'), { mime: 'text/plain', maxBytes: 10 });
    for (const name of ['../secret', `${stored.sha256}.json`, stored.sha256.toUpperCase(), '', 'a'.repeat(63), `${'a'.repeat(64)}/..`, '/etc/passwd']) {
      expect(await store.get(name), name).toBeUndefined();
      expect(await store.stat(name), name).toBeUndefined();
    }
    expect(await store.get('b'.repeat(64))).toBeUndefined();
  });

  it('sweeps files past the retention, then the oldest until within the quota', async () => {
    const store = new FileMediaStore({ dir });
    const put = (text: string, ageDays: number) => store.put(Buffer.from(text), { mime: 'text/plain', maxBytes: 1000, now: NOW - ageDays * DAY });
    const ancient = await put('a'.repeat(100), 40);
    const old = await put('b'.repeat(100), 20);
    const middle = await put('c'.repeat(100), 10);
    const recent = await put('d'.repeat(100), 1);
    expect(await store.sweep({ now: NOW, retentionMs: 30 * DAY, maxBytes: 10_000 })).toEqual({ removed: 1, bytes: 100 });
    expect(await store.stat(ancient.sha256)).toBeUndefined();
    expect(await store.get(ancient.sha256)).toBeUndefined();
    // Quota 250 bytes: the oldest go first until the rest fit.
    expect(await store.sweep({ now: NOW, retentionMs: 30 * DAY, maxBytes: 250 })).toEqual({ removed: 1, bytes: 100 });
    expect(await store.stat(old.sha256)).toBeUndefined();
    expect(await store.stat(middle.sha256)).toBeDefined();
    expect(await store.stat(recent.sha256)).toBeDefined();
    expect(await store.sweep({ now: NOW, retentionMs: 30 * DAY, maxBytes: 100 })).toEqual({ removed: 1, bytes: 100 });
    expect(await store.stat(middle.sha256)).toBeUndefined();
    expect((await readdir(dir)).sort()).toEqual([recent.sha256, `${recent.sha256}.json`].sort());
    // A file stored again is young again.
    await put('d'.repeat(100), 0);
    expect(await store.sweep({ now: NOW + 2 * DAY, retentionMs: 2.5 * DAY, maxBytes: 1000 })).toEqual({ removed: 0, bytes: 0 });
  });

  it('sweeps an empty or missing folder, and deletes temporary files left by a crash', async () => {
    expect(await new FileMediaStore({ dir }).sweep({ now: NOW, retentionMs: DAY, maxBytes: 0 })).toEqual({ removed: 0, bytes: 0 });
    const store = new FileMediaStore({ dir });
    await store.put(Buffer.from('x'), { mime: 'text/plain', maxBytes: 10, now: NOW });
    await writeFile(path.join(dir, '.tmp-deadbeef'), 'half a download');
    await store.sweep({ now: Date.now() + 2 * 60 * 60 * 1000, retentionMs: 365 * DAY, maxBytes: 1e9 });
    expect((await readdir(dir)).filter((n) => n.startsWith('.tmp-'))).toEqual([]);
  });

  it('starts without looking at 10,000 stored files, and sweeps them without stalling the event loop', { timeout: 120_000 }, async () => {
    const seed = new FileMediaStore({ dir });
    await seed.put(Buffer.from('seed'), { mime: 'text/plain', maxBytes: 10, now: NOW });
    const names: string[] = [];
    for (let i = 0; i < 10_000; i += 200) {
      await Promise.all(Array.from({ length: 200 }, async (_, j) => {
        const name = sha(`file ${i + j}`);
        names.push(name);
        await writeFile(path.join(dir, name), `file ${i + j}`);
        await writeFile(path.join(dir, `${name}.json`), '{"mime":"text/plain"}');
      }));
    }
    const started = performance.now();
    const store = new FileMediaStore({ dir });
    // The seeded files' times are the clock's; the new one is stored a minute later, so it is the newest.
    const later = Date.now() + 60_000;
    const stored = await store.put(Buffer.from('new one'), { mime: 'text/plain', maxBytes: 100, now: later });
    expect((await store.get(stored.sha256))?.toString()).toBe('new one');
    expect((await store.stat(names[1234]!))?.mime).toBe('text/plain');
    const startMs = performance.now() - started;
    // Listing and stat'ing 10,000 files takes far longer than this on this machine; construction does neither.
    expect(startMs).toBeLessThan(100);

    const probe = await stallProbe().settled();
    const sweepStarted = performance.now();
    const swept = await store.sweep({ now: later, retentionMs: 365 * DAY, maxBytes: 5 * 10 });
    const sweepMs = performance.now() - sweepStarted;
    const stall = probe.stop();
    console.log(`10,000 files: construct + put + get + stat ${startMs.toFixed(1)} ms; sweep ${Math.round(sweepMs)} ms, worst event-loop stall ${stall.toFixed(1)} ms of the main thread's own work (${probe.wall().toFixed(1)} ms wall-clock)`);
    expect(swept.removed).toBeGreaterThan(9_990);
    expect(swept.removed).toBeLessThan(10_001);
    expect(stall).toBeLessThan(50);
    expect(await store.get(stored.sha256)).toBeDefined(); // the newest stays
    expect((await stat(dir)).isDirectory()).toBe(true);
  });
});

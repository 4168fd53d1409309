import { appendFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.ts';
import { JsonlTranscriptStore, type TranscriptMessage } from '../../src/sessions/transcript.ts';
import { Writable } from 'node:stream';
import { useTempDir } from '../helpers/fixtures.ts';

const msg = (id: string, content: string): TranscriptMessage => ({ type: 'message', id, role: 'user', content, at: '2026-03-10T12:00:00.000Z' });

describe('JsonlTranscriptStore', () => {
  const tmp = useTempDir();
  let lines: string[];
  let store: JsonlTranscriptStore;
  const sid = '0b0e6f52-1111-4c3a-9a56-3c2a9b2d0d01';
  beforeEach(() => {
    lines = [];
    const sink = new Writable({ write(chunk, _e, cb) { lines.push(String(chunk)); cb(); } });
    store = new JsonlTranscriptStore({ dir: tmp.dir, logger: createLogger({ level: 'warn', destination: sink }), cacheLimit: 0 });
  });

  it('writes the SPEC header, then one JSON line per entry', async () => {
    await store.create(sid, 'agent:main:main', new Date('2026-03-10T12:00:00Z'));
    await store.append(sid, [msg('1', 'hello'), msg('2', 'world')]);
    const raw = readFileSync(path.join(tmp.dir, `${sid}.jsonl`), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(raw[0]).toEqual({ type: 'session', version: 1, sessionId: sid, key: 'agent:main:main', createdAt: '2026-03-10T12:00:00.000Z' });
    expect(raw.slice(1).map((e) => e.content)).toEqual(['hello', 'world']);
    expect((await store.read(sid)).map((e) => e.id)).toEqual(['1', '2']);
  });

  it('skips a torn last line with a warning, and the next append starts on a line of its own', async () => {
    await store.create(sid, 'agent:main:main', new Date());
    await store.append(sid, msg('1', 'kept'));
    appendFileSync(path.join(tmp.dir, `${sid}.jsonl`), '{"type":"message","id":"2","role":"user","cont');
    const entries = await store.read(sid);
    expect(entries.map((e) => e.id)).toEqual(['1']);
    expect(lines.join('')).toMatch(/torn last line/);

    const fresh = new JsonlTranscriptStore({ dir: tmp.dir, logger: createLogger({ level: 'silent' }), cacheLimit: 0 });
    await fresh.append(sid, msg('3', 'after the crash'));
    expect((await fresh.read(sid)).map((e) => e.id)).toEqual(['1', '3']);
  });

  it('archives on reset as <id>.jsonl.reset.<UTC timestamp> and prunes archives past retention', async () => {
    await store.create(sid, 'k', new Date());
    await store.append(sid, msg('1', 'x'));
    const archived = await store.archive(sid, new Date('2026-03-10T04:00:00.123Z'));
    expect(path.basename(archived!)).toBe(`${sid}.jsonl.reset.2026-03-10T04-00-00-123Z`);
    expect(await store.read(sid)).toEqual([]);
    writeFileSync(path.join(tmp.dir, 'old.jsonl.reset.2026-01-01T00-00-00-000Z'), '');
    const deleted = await store.pruneArchives(new Date('2026-03-15T00:00:00Z'), 30 * 86_400_000);
    expect(deleted).toBe(1);
    expect(readdirSync(tmp.dir).sort()).toEqual([`${sid}.jsonl.reset.2026-03-10T04-00-00-123Z`]);
  });

  it('refuses a session id that is not a plain file name, every time it is asked, and keeps others under its folder', async () => {
    for (const bad of ['../escape', 'a/b', 'x.jsonl', '', 'sp ace']) {
      expect(() => store.pathOf(bad)).toThrow(`Invalid session id "${bad}".`);
      expect(() => store.pathOf(bad)).toThrow(`Invalid session id "${bad}".`);
      await expect(store.append(bad, [msg('m1', 'hi')])).rejects.toThrow('Invalid session id');
    }
    expect(store.pathOf(sid)).toBe(path.join(tmp.dir, `${sid}.jsonl`));
    expect(store.pathOf(sid)).toBe(path.join(tmp.dir, `${sid}.jsonl`));
    expect(readdirSync(tmp.dir)).toEqual([]);
  });

  it('reads a missing transcript as empty', async () => {
    expect(await store.read('3b0e6f52-1111-4c3a-9a56-3c2a9b2d0d09')).toEqual([]);
  });
});

import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { applyBootstrapLimits, BootstrapLoader, renderBootstrap, truncateMiddle } from '../../../src/agent/context/bootstrap.ts';
import { tempDir } from '../../helpers/gateway.ts';

const body = (n: number) => Array.from({ length: n }, (_, i) => String.fromCharCode(97 + (i % 26))).join('');

describe('bootstrap files', () => {
  let tmp: ReturnType<typeof tempDir> | undefined;
  afterEach(() => { tmp?.remove(); tmp = undefined; });

  it('cuts a long file to its first 70% and last 20% of the limit around a marker naming the file', () => {
    const text = `START${body(10_000)}END`;
    const cut = truncateMiddle(text, 2000, 'SOUL.md');
    expect(cut.length).toBeLessThanOrEqual(2000);
    expect(cut.startsWith(text.slice(0, 1400))).toBe(true);
    expect(cut.endsWith(text.slice(-400))).toBe(true);
    expect(cut).toContain('truncated SOUL.md');
    expect(cut).toContain(`${text.length - 1800} of ${text.length} chars omitted`);
    expect(truncateMiddle('short', 2000, 'SOUL.md')).toBe('short');
  });

  it('keeps the result within tiny limits and never splits a surrogate pair', () => {
    const emoji = '😀'.repeat(500);
    for (const limit of [80, 120, 333]) {
      const cut = truncateMiddle(emoji, limit, 'USER.md');
      expect(cut.length).toBeLessThanOrEqual(limit);
      expect(cut).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
    }
  });

  it('applies the per-file limit, then the total budget; a missing file is noted', () => {
    const files = [
      { name: 'AGENTS.md', path: '/w/AGENTS.md', raw: body(800) },
      { name: 'SOUL.md', path: '/w/SOUL.md', raw: body(5000) },
      { name: 'IDENTITY.md', path: '/w/IDENTITY.md' },
      { name: 'USER.md', path: '/w/USER.md', raw: body(900) },
      { name: 'TOOLS.md', path: '/w/TOOLS.md', raw: body(300) },
    ];
    const out = applyBootstrapLimits(files, { maxChars: 1000, totalMaxChars: 2300 });
    expect(out.map((f) => [f.name, f.status, f.cutBy])).toEqual([
      ['AGENTS.md', 'ok', undefined], ['SOUL.md', 'truncated', 'file'], ['IDENTITY.md', 'missing', undefined],
      ['USER.md', 'truncated', 'total'], ['TOOLS.md', 'truncated', 'total'],
    ]);
    expect(out[0]!.injectedChars).toBe(800);
    expect(out[1]!.injectedChars).toBeLessThanOrEqual(1000);
    expect(out[1]!.rawChars).toBe(5000);
    expect(out.reduce((n, f) => n + f.injectedChars, 0)).toBeLessThanOrEqual(2300);
    expect(out[3]!.content).toContain('truncated USER.md');
    const prompt = renderBootstrap(out, { maxChars: 1000, totalMaxChars: 2300 });
    expect(prompt).toContain('## IDENTITY.md\n\n[missing: IDENTITY.md is not in the workspace]');
    expect(prompt).toContain('## TOOLS.md\n\n[omitted: TOOLS.md (300 chars) does not fit');
    expect(prompt.indexOf('## AGENTS.md')).toBeLessThan(prompt.indexOf('## SOUL.md'));
  });

  it('reads the six files of a workspace in order and sees edits', async () => {
    tmp = tempDir();
    const ws = path.join(tmp.dir, 'ws');
    mkdirSync(ws);
    writeFileSync(path.join(ws, 'AGENTS.md'), 'Always answer in haiku.\r\n');
    writeFileSync(path.join(ws, 'HEARTBEAT.md'), '');
    const loader = new BootstrapLoader();
    const first = await loader.load(ws, { maxChars: 20_000, totalMaxChars: 150_000 });
    expect(first.map((f) => [f.name, f.status])).toEqual([
      ['AGENTS.md', 'ok'], ['SOUL.md', 'missing'], ['IDENTITY.md', 'missing'], ['USER.md', 'missing'], ['TOOLS.md', 'missing'], ['HEARTBEAT.md', 'ok'],
    ]);
    expect(first[0]!.content).toBe('Always answer in haiku.\n');
    // Unchanged files are not touched again: the same loaded result comes back.
    expect(await loader.load(ws, { maxChars: 20_000, totalMaxChars: 150_000 })).toBe(first);
    writeFileSync(path.join(ws, 'AGENTS.md'), 'Always answer in limericks, and never in haiku.');
    writeFileSync(path.join(ws, 'USER.md'), 'The user is called Ada.');
    // The folder's change event arrives within milliseconds; the next turn after it sees the edit.
    let second = await loader.load(ws, { maxChars: 20_000, totalMaxChars: 150_000 });
    for (let i = 0; i < 200 && second[3]!.status === 'missing'; i++) {
      await new Promise((r) => setTimeout(r, 10));
      second = await loader.load(ws, { maxChars: 20_000, totalMaxChars: 150_000 });
    }
    expect(second[0]!.content).toBe('Always answer in limericks, and never in haiku.');
    expect(second[3]).toMatchObject({ name: 'USER.md', status: 'ok', content: 'The user is called Ada.' });
    loader.close();
  });

  it('remembers a missing workspace (no look per turn) until a watcher sees it created, also after it was removed', async () => {
    tmp = tempDir();
    const ws = path.join(tmp.dir, 'not', 'yet', 'ws');
    const limits = { maxChars: 20_000, totalMaxChars: 150_000 };
    const loader = new BootstrapLoader();
    const waitFor = async (done: (files: Awaited<ReturnType<BootstrapLoader['load']>>) => boolean) => {
      let files = await loader.load(ws, limits);
      for (let i = 0; i < 300 && !done(files); i++) {
        await new Promise((r) => setTimeout(r, 10));
        files = await loader.load(ws, limits);
      }
      return files;
    };
    const missing = await loader.load(ws, limits);
    expect(missing.every((f) => f.status === 'missing')).toBe(true);
    // The remembered result comes back as it is: the folder is not looked for again.
    expect(await loader.load(ws, limits)).toBe(missing);
    expect(await loader.load(ws, limits)).toBe(missing);

    mkdirSync(ws, { recursive: true });
    writeFileSync(path.join(ws, 'SOUL.md'), 'Be kind.');
    const created = await waitFor((files) => files[1]!.status === 'ok');
    expect(created[1]).toMatchObject({ name: 'SOUL.md', status: 'ok', content: 'Be kind.' });
    expect(await loader.load(ws, limits)).toBe(created);

    rmSync(path.join(tmp.dir, 'not'), { recursive: true });
    const gone = await waitFor((files) => files[1]!.status === 'missing');
    expect(gone.every((f) => f.status === 'missing')).toBe(true);
    mkdirSync(ws, { recursive: true });
    writeFileSync(path.join(ws, 'SOUL.md'), 'Be kinder.');
    const back = await waitFor((files) => files[1]!.content === 'Be kinder.');
    expect(back[1]).toMatchObject({ status: 'ok', content: 'Be kinder.' });
    loader.close();
  });
});

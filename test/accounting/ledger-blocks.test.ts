// Issue 32: a session's timeline with a big ledger reads only the archive members that hold its records.
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { blockIndexName, compressArchive, indexArchive, keyBlocks } from '../../src/accounting/ledger-blocks.ts';
import { TokenLedger } from '../../src/accounting/ledger.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { readLedgerBackwards } from '../../src/accounting/ledger-reader.ts';
import type { LedgerRecord } from '../../src/accounting/ledger-record.ts';
import { record, llmCall } from './records.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const T0 = Date.UTC(2026, 0, 10, 12);
const RARE = 'agent:main:telegram:direct:rare';
const LATE = 'agent:main:telegram:direct:late';
const keyOf = (i: number) => (i < 2 ? RARE : i >= 2498 ? LATE : `agent:main:telegram:direct:${i % 37}`);
/** About 1 MB of records: the rare key's two first, then 37 keys in turn, the late key's two last. */
const lines = Array.from({ length: 2500 }, (_, i) => `${JSON.stringify(record(llmCall({
  correlationId: `c${i}`, sessionKey: keyOf(i), sessionId: `sid-${i % 37}`, channel: 'telegram', modelId: 'gpt-test', kind: 'turn', isEstimated: false,
  usage: { inputTokens: 100 + i, outputTokens: 20, cacheReadTokens: 0, cacheWriteTokens: 0 }, at: T0 + i * 1000,
})))}\n`);

describe('block-compressed ledger archives', () => {
  const tmp = useTempDir('switchboard-ledger-blocks-');
  const archiveOf = async () => {
    const name = 'turn-token-usage.2026-01-10T12-00-00-000Z.jsonl';
    writeFileSync(path.join(tmp.dir, name), lines.join(''));
    const compressed = await compressArchive(tmp.dir, name);
    return { name: compressed, rotatedAt: T0, compressed: true };
  };
  const collect = async (blocks: AsyncIterable<Buffer> | undefined, key: string) => {
    const ids: string[] = [];
    for await (const block of blocks ?? []) {
      const inBlock = block.toString().trim().split('\n').map((l) => JSON.parse(l) as LedgerRecord).filter((r) => r.sessionKey === key);
      ids.push(...inBlock.reverse().map((r) => r.correlationId));
    }
    return ids;
  };

  it('is one gzip file to any reader (members concatenate to the same lines), with a block index beside it', async () => {
    const archive = await archiveOf();
    expect(gunzipSync(readFileSync(path.join(tmp.dir, archive.name))).toString()).toBe(lines.join(''));
    const index = JSON.parse(await readFile(path.join(tmp.dir, blockIndexName(archive.name)), 'utf8')) as { offsets: number[]; keys: Record<string, number[]> };
    expect(index.offsets.length).toBeGreaterThan(8);
    expect(index.keys[RARE]).toEqual([0]);
  });

  it('gives the members of a key newest first, each holding its records', async () => {
    const archive = await archiveOf();
    const key = 'agent:main:telegram:direct:5';
    const expected = lines.map((_, i) => i).filter((i) => keyOf(i) === key).reverse().map((i) => `c${i}`);
    expect(await collect(await keyBlocks(tmp.dir, archive, key), key)).toEqual(expected);
    expect(await collect(await keyBlocks(tmp.dir, archive, RARE), RARE)).toEqual(['c1', 'c0']);
    expect(await collect(await keyBlocks(tmp.dir, archive, 'agent:main:telegram:direct:none'), 'none')).toEqual([]);
  });

  it('a timeline reads only the members that hold its key: the others may be broken', async () => {
    const archive = await archiveOf();
    const file = path.join(tmp.dir, archive.name);
    const index = JSON.parse(await readFile(path.join(tmp.dir, blockIndexName(archive.name)), 'utf8')) as { offsets: number[] };
    // Every member but the last (the only one with the late key's records) overwritten with zeros.
    const bytes = readFileSync(file);
    bytes.fill(0, 0, index.offsets[index.offsets.length - 1]);
    writeFileSync(file, bytes);
    const active = path.join(tmp.dir, 'turn-token-usage.jsonl');
    const found = await readLedgerBackwards({ file: active, dir: tmp.dir, archives: () => [archive] }, (r) => r.sessionKey === LATE, 10, { sessionKey: LATE });
    expect(found.map((r) => r.correlationId)).toEqual(['c2499', 'c2498']);
  });

  /** An archive as versions before block indexes wrote it: one gzip member, no index. */
  const oldArchive = () => {
    const name = 'turn-token-usage.2026-01-10T12-00-00-000Z.jsonl.gz';
    writeFileSync(path.join(tmp.dir, name), gzipSync(lines.join('')));
    return { name, rotatedAt: T0, compressed: true };
  };

  it('an archive compressed before block indexes gets them: the same lines, in members a timeline reads by key; once', async () => {
    const archive = oldArchive();
    expect(await keyBlocks(tmp.dir, archive, RARE)).toBeUndefined();
    expect(await indexArchive(tmp.dir, archive.name)).toBe(true);
    expect(gunzipSync(readFileSync(path.join(tmp.dir, archive.name))).toString()).toBe(lines.join(''));
    expect(await collect(await keyBlocks(tmp.dir, archive, RARE), RARE)).toEqual(['c1', 'c0']);
    const indexed = readFileSync(path.join(tmp.dir, archive.name));
    expect(await indexArchive(tmp.dir, archive.name)).toBe(false);
    expect(readFileSync(path.join(tmp.dir, archive.name)).equals(indexed)).toBe(true);
  });

  it('an archive that does not decompress is left as it is, without a partial copy or an index', async () => {
    const name = 'turn-token-usage.2026-01-10T12-00-00-000Z.jsonl.gz';
    const broken = gzipSync(lines.join('')).subarray(0, 5000);
    writeFileSync(path.join(tmp.dir, name), broken);
    await expect(indexArchive(tmp.dir, name)).rejects.toThrow();
    expect(readFileSync(path.join(tmp.dir, name)).equals(broken)).toBe(true);
    expect(readdirSync(tmp.dir).sort()).toEqual([name]);
  });

  it('the ledger indexes such archives when it opens, in the background', async () => {
    const archive = oldArchive();
    const ledger = new TokenLedger({ file: path.join(tmp.dir, 'turn-token-usage.jsonl'), logger: silentLogger(), now: () => T0 + 3_600_000 });
    await ledger.open();
    await ledger.close();
    expect(JSON.parse(readFileSync(path.join(tmp.dir, blockIndexName(archive.name)), 'utf8'))).toMatchObject({ version: 1, keys: { [RARE]: [0] } });
  });

  it('an archive compressed before block indexes is read whole', async () => {
    const archive = await archiveOf();
    rmSync(path.join(tmp.dir, blockIndexName(archive.name)));
    expect(await keyBlocks(tmp.dir, archive, RARE)).toBeUndefined();
    const active = path.join(tmp.dir, 'turn-token-usage.jsonl');
    const found = await readLedgerBackwards({ file: active, dir: tmp.dir, archives: () => [archive] }, (r) => r.sessionKey === RARE, 10, { sessionKey: RARE });
    expect(found.map((r) => r.correlationId)).toEqual(['c1', 'c0']);
  });
});

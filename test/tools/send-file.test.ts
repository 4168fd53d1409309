import { mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage, OutboundFile } from '../../src/core/message.ts';
import { emptyTokens, type SessionEntry } from '../../src/sessions/entry.ts';
import type { SessionManager } from '../../src/sessions/manager.ts';
import { createToolRegistry } from '../../src/tools/index.ts';
import { mediaTools, mimeOfName } from '../../src/tools/media-tools.ts';
import { ToolRegistry, type CallContext } from '../../src/tools/registry.ts';
import { testConfig, tempDir } from '../helpers/gateway.ts';

// Issue 28: send_file sends a file of the agent's workspace, and nothing else.

const tmp = tempDir();
afterAll(() => tmp.remove());
const workspace = path.join(tmp.dir, 'workspace');
const outsideDir = path.join(tmp.dir, 'outside');
const MAX = 4096;

beforeAll(() => {
  mkdirSync(path.join(workspace, 'reports'), { recursive: true });
  mkdirSync(outsideDir, { recursive: true });
  writeFileSync(path.join(workspace, 'reports', 'q3.pdf'), Buffer.alloc(1500, 1));
  writeFileSync(path.join(workspace, 'notes.MD'), '# notes\n');
  writeFileSync(path.join(workspace, 'blob.bin'), Buffer.alloc(10, 2));
  writeFileSync(path.join(workspace, 'exact.txt'), Buffer.alloc(MAX, 3));
  writeFileSync(path.join(workspace, 'big.png'), Buffer.alloc(MAX + 1, 4));
  writeFileSync(path.join(workspace, '..draft.txt'), 'draft');
  writeFileSync(path.join(outsideDir, 'secret.txt'), 'secret');
  symlinkSync(path.join(outsideDir, 'secret.txt'), path.join(workspace, 'link-out.txt'));
  symlinkSync(outsideDir, path.join(workspace, 'dir-out'));
  symlinkSync(path.join(workspace, 'notes.MD'), path.join(workspace, 'link-in.md'));
});

const entry: SessionEntry = {
  key: 'agent:main:main', sessionId: 'sid', agentId: 'main', channel: 'telegram', accountId: 'default', chatType: 'direct', createdAt: 0, updatedAt: 0,
  sessionStartedAt: 0, state: 'active', runState: 'running', overrides: {}, tokens: emptyTokens(), contextTokens: 0, compactionCount: 0, messageCount: 0,
};

function setup(options: { chat?: boolean } = {}) {
  const sent: { file: OutboundFile; caption?: string }[] = [];
  const registry = new ToolRegistry({ timeoutMs: 5000, maxResultChars: 10_000 });
  for (const tool of mediaTools({ maxBytes: MAX })) registry.register(tool);
  const enabled = registry.schemasFor({ preset: 'full', allow: [], deny: [] });
  const context: CallContext = {
    entry, correlationId: 'c', signal: new AbortController().signal, logger: silentLogger(), workspace, timezone: 'UTC', now: () => 0,
    message: { id: 'm', channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: 'a', peerId: 'a', sender: { id: 'a' }, text: 't', attachments: [], mentionsBot: true, receivedAt: 0 },
    lendSlot: (work) => work(),
    ...(options.chat === false ? {} : { sendFile: async (file: OutboundFile, caption?: string) => { sent.push(caption === undefined ? { file } : { file, caption }); } }),
  };
  const send = (args: Record<string, unknown>) => registry.execute({ id: 'call-1', name: 'send_file', arguments: JSON.stringify(args) }, enabled, context);
  return { sent, send };
}

describe('send_file', () => {
  it('sends a workspace file: its real path, name, mime and size, with the caption', async () => {
    const { sent, send } = setup();
    const outcome = await send({ path: 'reports/q3.pdf', caption: 'Q3 numbers' });
    expect(outcome.outcome).toBe('ok');
    expect(JSON.parse(outcome.content)).toEqual({ status: 'sent', name: 'q3.pdf', mime: 'application/pdf', size: 1500 });
    expect(sent).toEqual([{ file: { path: realpathSync(path.join(workspace, 'reports', 'q3.pdf')), name: 'q3.pdf', mime: 'application/pdf', size: 1500 }, caption: 'Q3 numbers' }]);
  });

  it('takes an absolute path inside the workspace, a symlink that stays inside, and a file of exactly media.maxBytes', async () => {
    const { sent, send } = setup();
    expect((await send({ path: path.join(workspace, 'blob.bin') })).outcome).toBe('ok');
    expect((await send({ path: './link-in.md' })).outcome).toBe('ok');
    expect((await send({ path: 'exact.txt' })).outcome).toBe('ok');
    expect(sent.map((s) => [path.relative(realpathSync(workspace), s.file.path), s.file.name, s.file.mime, s.file.size, s.caption])).toEqual([
      ['blob.bin', 'blob.bin', 'application/octet-stream', 10, undefined],
      ['notes.MD', 'notes.MD', 'text/markdown', 8, undefined],
      ['exact.txt', 'exact.txt', 'text/plain', MAX, undefined],
    ]);
  });

  it('a file whose name starts with two dots is inside the workspace', async () => {
    const { sent, send } = setup();
    expect((await send({ path: '..draft.txt' })).outcome).toBe('ok');
    expect(sent.map((s) => s.file.name)).toEqual(['..draft.txt']);
  });

  const refusals: [string, Record<string, unknown>, RegExp][] = [
    ['a path up and out of the workspace', { path: '../outside/secret.txt' }, /outside the workspace/],
    ['a path that climbs out and back in under another name', { path: 'reports/../../outside/secret.txt' }, /outside the workspace/],
    ['a missing path outside the workspace (nothing is told about what is there)', { path: '../outside/nothing-here.txt' }, /outside the workspace/],
    ['an absolute path elsewhere', { path: path.join(outsideDir, 'secret.txt') }, /outside the workspace/],
    ['a symlink to a file outside the workspace', { path: 'link-out.txt' }, /outside the workspace/],
    ['a file under a symlinked folder outside the workspace', { path: 'dir-out/secret.txt' }, /outside the workspace/],
    ['a directory', { path: 'reports' }, /is a directory/],
    ['the workspace itself', { path: '.' }, /is a directory/],
    ['a missing file', { path: 'reports/q4.pdf' }, /no file "reports\/q4\.pdf"/],
    ['a file over media.maxBytes', { path: 'big.png' }, /is 4 KB \(4097 bytes\); at most 4 KB \(4096 bytes, media\.maxBytes\) can be sent\./],
  ];
  for (const [what, args, message] of refusals) {
    it(`refuses ${what}, and sends nothing`, async () => {
      const { sent, send } = setup();
      const outcome = await send(args);
      expect(outcome.outcome).toBe('error');
      expect(outcome.content).toMatch(/^Error: /);
      expect(outcome.content).toMatch(message);
      expect(outcome.content).not.toContain('secret\n');
      expect(sent).toEqual([]);
    });
  }

  it('a chat that cannot receive files gets a clear error', async () => {
    const { send } = setup({ chat: false });
    const outcome = await send({ path: 'reports/q3.pdf' });
    expect(outcome).toEqual({ outcome: 'error', content: 'Error: this chat cannot receive files.' });
  });

  it('a failed upload becomes a result the model reads', async () => {
    const registry = new ToolRegistry({ timeoutMs: 5000, maxResultChars: 10_000 });
    for (const tool of mediaTools({ maxBytes: MAX })) registry.register(tool);
    const context: CallContext = {
      entry, correlationId: 'c', signal: new AbortController().signal, logger: silentLogger(), workspace, timezone: 'UTC', now: () => 0,
      message: { id: 'm' } as InboundMessage, lendSlot: (work) => work(), sendFile: async () => { throw new Error('Telegram refused the upload (HTTP 413)'); },
    };
    const outcome = await registry.execute({ id: 'c2', name: 'send_file', arguments: '{"path":"blob.bin"}' }, registry.schemasFor({ preset: 'full', allow: [], deny: [] }), context);
    expect(outcome).toEqual({ outcome: 'error', content: 'Error: the tool "send_file" failed: Telegram refused the upload (HTTP 413)' });
  });

  it('detects the mime type from the extension, any case, else application/octet-stream', () => {
    expect(['a.PNG', 'b.jpeg', 'c.csv', 'd.json', 'e.ogg', 'f', 'g.weird', '.hidden'].map(mimeOfName)).toEqual([
      'image/png', 'image/jpeg', 'text/csv', 'application/json', 'audio/ogg', 'application/octet-stream', 'application/octet-stream', 'application/octet-stream',
    ]);
  });

  it('is a built-in tool of group:media, in the messaging and full presets, limited by media.maxBytes', async () => {
    const config = testConfig(tmp.dir, { media: { maxBytes: 2048 } });
    const registry = createToolRegistry({
      config, sessions: {} as SessionManager, sink: () => { throw new Error('unused'); }, history: async () => [],
      reader: { get: async () => undefined, all: async function* () { /* none */ } },
    });
    expect(registry.get('send_file')?.group).toBe('group:media');
    const names = (preset: 'messaging' | 'full' | 'minimal' | 'none') => registry.schemasFor({ preset, allow: [], deny: [] }).map((s) => s.name);
    expect(names('messaging')).toContain('send_file');
    expect(names('full')).toContain('send_file');
    expect(names('minimal')).not.toContain('send_file');
    expect(registry.schemasFor({ preset: 'messaging', allow: [], deny: ['group:media'] }).map((s) => s.name)).not.toContain('send_file');
    expect(registry.schemasFor({ preset: 'minimal', allow: ['group:media'], deny: [] }).map((s) => s.name)).toContain('send_file');
    // The registered tool takes its limit from the config: exact.txt (4096 bytes) is over 2048.
    const sent: OutboundFile[] = [];
    const outcome = await registry.execute({ id: 'c3', name: 'send_file', arguments: '{"path":"exact.txt"}' }, registry.schemasFor({ preset: 'full', allow: [], deny: [] }), {
      entry, correlationId: 'c', signal: new AbortController().signal, logger: silentLogger(), workspace, timezone: 'UTC', now: () => 0,
      message: { id: 'm' } as InboundMessage, lendSlot: (work) => work(), sendFile: async (file) => { sent.push(file); },
    });
    expect(outcome.content).toMatch(/at most 2 KB \(2048 bytes, media\.maxBytes\)/);
    expect(sent).toEqual([]);
  });
});

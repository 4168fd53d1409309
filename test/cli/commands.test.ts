import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { chatLoop, runChat } from '../../src/cli/chat.ts';
import { initWorkspaces } from '../../src/cli/init.ts';
import { pairingApprove } from '../../src/cli/pairing.ts';
import { renderInline, TerminalMarkdown } from '../../src/cli/terminal-markdown.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { StateLock } from '../../src/core/state-lock.ts';
import { dmScopeWarning } from '../../src/routing/dm-scope-warning.ts';
import { PairingStore } from '../../src/routing/pairing.ts';
import { testConfig } from '../helpers/gateway.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const strip = (s: string) => s.replace(/\x1b\[\d+m/g, '');

describe('command line pieces', () => {
  const tmp = useTempDir();

  it('pairing approve names an unknown channel and the likely one; a known one works in-process and frees the lock', async () => {
    const config = testConfig(tmp.dir);
    const out = new PassThrough();
    const err = new PassThrough();
    await expect(pairingApprove(config, 'telgram', 'ABCDEFGH', out, err)).rejects.toThrow('Unknown channel "telgram" (did you mean "telegram"?): pairing works on telegram, discord, slack.');
    await expect(pairingApprove(config, 'whatsapp', 'ABCDEFGH', out, err)).rejects.toThrow(/^Unknown channel "whatsapp": pairing works on/);
    const store = new PairingStore({ uri: config.store, clock: new ManualClock(Date.now()) });
    const request = await store.request('telegram', 'default', '42', 'Alice');
    await store.close();
    if (request.status === 'full') throw new Error('unexpected');
    await pairingApprove(config, 'Telegram', request.request.code.toLowerCase(), out, err);
    expect(String(out.read())).toBe('Approved telegram peer 42 (Alice). Their next message goes through.\n');
    expect(await StateLock.isHeld(config.stateDir)).toBe(false);
  });

  it('init writes the six workspace templates and keeps files that exist', () => {
    const config = testConfig(tmp.dir);
    const workspace = config.agents[0]!.workspace;
    const first = initWorkspaces(config);
    expect(first.map((r) => [path.basename(r.file), r.action])).toEqual(['AGENTS.md', 'SOUL.md', 'IDENTITY.md', 'USER.md', 'TOOLS.md', 'HEARTBEAT.md'].map((f) => [f, 'written']));
    for (const r of first) expect(readFileSync(r.file, 'utf8')).toMatch(/^# .*\n\n<!-- [\s\S]+-->/);
    expect(existsSync(path.join(workspace, 'memory'))).toBe(true);
    writeFileSync(path.join(workspace, 'SOUL.md'), 'mine');
    const second = initWorkspaces(config);
    expect(second.every((r) => r.action === 'kept')).toBe(true);
    expect(readFileSync(path.join(workspace, 'SOUL.md'), 'utf8')).toBe('mine');
    expect(initWorkspaces(config, { force: true }).every((r) => r.action === 'written')).toBe(true);
  });

  it('warns when a second person reaches the one main DM session, not before', () => {
    const config = (telegram: Record<string, unknown>, session: Record<string, unknown> = {}) => testConfig(tmp.dir, { channels: { telegram }, session }, { TELEGRAM_BOT_TOKEN: '1:abc' });
    const peer = (channel: string, peerId: string) => ({ channel, peerId, approvedAt: 0 });
    expect(dmScopeWarning(config({}), [peer('telegram', '42')])).toBeUndefined();
    expect(dmScopeWarning(config({}), [peer('telegram', '42'), peer('telegram', '43')])).toMatch(/^session\.dmScope is "main" and 2 different people can write to the bot directly \(telegram:42, telegram:43\).*"per-peer"/);
    expect(dmScopeWarning(config({ dmPolicy: 'open' }), [])).toMatch(/direct messages on telegram are open to anyone/);
    expect(dmScopeWarning(config({ dmPolicy: 'open' }, { dmScope: 'per-peer' }), [])).toBeUndefined();
    expect(dmScopeWarning(config({ dmPolicy: 'allowlist', allowFrom: ['42', 'telegram:42'] }), [])).toBeUndefined();
    expect(dmScopeWarning(config({ allowFrom: ['42'] }, { identityLinks: { alice: ['telegram:42', 'telegram:43'] } }), [peer('telegram', '43')])).toBeUndefined();
  });

  it('renders markdown for a terminal as it streams, and passes it through when not a terminal', () => {
    let out = '';
    const md = new TerminalMarkdown((t) => { out += t; }, { color: true });
    for (const piece of ['# Ti', 'tle\nSome **bo', 'ld** and `co', 'de` and a [link](https://x.y).\n- item *one*\n```ts\nconst a = 1;\n```\n> quoted']) md.push(piece);
    md.end();
    expect(out).toContain('\x1b[1m\x1b[4mTitle\x1b[24m\x1b[22m\n');
    expect(out).toContain('Some \x1b[1mbold\x1b[22m and \x1b[36mcode\x1b[39m and a \x1b[4mlink\x1b[24m\x1b[2m (https://x.y)\x1b[22m.');
    expect(out).toContain('  • item \x1b[3mone\x1b[23m\n');
    expect(out).toContain('\x1b[36m  const a = 1;\x1b[39m');
    expect(strip(out)).toBe('Title\nSome bold and code and a link (https://x.y).\n  • item one\n── ts ──\n  const a = 1;\n──\n│ quoted');
    // A long paragraph is written before its line ends, never inside an open style.
    let partial = '';
    const streaming = new TerminalMarkdown((t) => { partial += t; }, { color: true });
    streaming.push('This is a long sentence that keeps going **and going and going** without');
    expect(strip(partial)).toBe('This is a long sentence that keeps going and going and going ');
    let plain = '';
    const raw = new TerminalMarkdown((t) => { plain += t; }, { color: false });
    raw.render('# Title\n**bold**');
    expect(plain).toBe('# Title\n**bold**');
    expect(strip(renderInline('snake_case_name and _real italics_'))).toBe('snake_case_name and real italics');
  });

  it('chat with no gateway runs the pipeline in-process, holding the state folder', async () => {
    const config = testConfig(tmp.dir);
    const input = new PassThrough();
    const output = new PassThrough();
    let text = '';
    output.on('data', (c: Buffer) => { text += c.toString(); });
    const done = runChat({ config, user: 'dora', input, output, logger: silentLogger(), color: false });
    await expect.poll(() => text).toContain('in this process (no gateway is running)');
    expect(await StateLock.isHeld(config.stateDir)).toBe(true);
    input.end('hi there\n/exit\n');
    await done;
    expect(text).toContain('(offline) You said: "hi there"');
    expect(await StateLock.isHeld(config.stateDir)).toBe(false);
  });

  it('the chat loop writes what a stream did not carry, and errors as one line', async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    let text = '';
    output.on('data', (c: Buffer) => { text += c.toString(); });
    const replies = [
      async (_t: string, onDelta: (d: string) => void) => { onDelta('part one'); return { reply: 'part one\n\n(note)', streamed: true }; },
      async () => { throw new Error('The running gateway at http://x did not answer (ECONNREFUSED)'); },
    ];
    const loop = chatLoop({ input, output, color: false, banner: 'hi', ask: (t, d) => replies.shift()!(t, d) });
    input.end('a\nb\n');
    await loop;
    expect(text).toBe('hi\n> part one\n\n(note)\n> \nerror: The running gateway at http://x did not answer (ECONNREFUSED)\n> \n');
  });
});

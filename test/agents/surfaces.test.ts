import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runDoctor } from '../../src/cli/doctor.ts';
import { runSessions } from '../../src/cli/sessions.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { emptyTokens } from '../../src/sessions/entry.ts';
import { openSessionStore } from '../../src/stores.ts';
import { testConfig, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const agents = { list: [{ id: 'home' }, { id: 'work' }], defaults: { tools: { preset: 'none' } } };
const toWork = [{ agentId: 'work', match: { channel: 'webchat', peer: { kind: 'direct', id: 'bob' } } }];
const perPeer = { dmScope: 'per-peer', reset: { mode: 'off' } };

async function output(run: (out: NodeJS.WritableStream) => Promise<unknown>): Promise<string> {
  const out = new PassThrough();
  let text = '';
  out.on('data', (chunk: Buffer) => { text += chunk.toString(); });
  await run(out);
  return text;
}

describe('what several agents look like from outside: doctor, switchboard sessions --agent, /status', () => {
  let gw: RunningGateway | undefined;
  let tmp: { dir: string; remove: () => void };
  beforeEach(() => { tmp = tempDir(); });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    tmp.remove();
  });

  const say = async (user: string, text: string) => {
    const res = await fetch(`${gw!.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user, text }) });
    return ((await res.json()) as { reply: string }).reply;
  };

  it('/status names the agent; sessions --agent lists only that agent\'s (from the gateway and from the store)', async () => {
    const config = testConfig(tmp.dir, { agents, bindings: toWork, session: perPeer });
    gw = await startGateway({ config, logger: silentLogger() });
    await say('bob', 'hello');
    await say('ann', 'hello');
    expect(await say('bob', '/status')).toContain('• agent: work');
    expect(await say('ann', '/status')).toContain('• agent: home');
    const listed = async (agent: string) => output((out) => runSessions(config, { agent, limit: 50, now: Date.now() }, out));
    const fromGateway = await listed('work');
    expect(fromGateway).toMatch(/^agent:work:direct:bob\n {2}id [0-9a-f-]+ · agent work · webchat · /);
    expect(fromGateway).not.toContain('ann');
    await gw.stop();
    gw = undefined;
    const fromStore = await listed('home');
    expect(fromStore).toMatch(/^agent:home:direct:ann\n {2}id [0-9a-f-]+ · agent home · webchat · /);
    expect(fromStore).not.toContain('bob');
    expect(await listed('nobody')).toBe('No sessions yet.\n');
  });

  it('doctor lists what the next start moves, and nothing once it has', async () => {
    gw = await startGateway({ config: testConfig(tmp.dir, { agents, session: perPeer }), logger: silentLogger() });
    await say('bob', 'hello');
    await gw.stop();
    gw = undefined;
    const changed = testConfig(tmp.dir, { agents, bindings: toWork, session: perPeer });
    const rekeyLine = async () => (await output((out) => runDoctor(changed, out))).split('\n').find((l) => l.includes('re-keying'));
    expect(await rekeyLine()).toBe('warn  re-keying: the next start moves 1 session: agent:home:direct:bob → agent:work:direct:bob');
    gw = await startGateway({ config: changed, logger: silentLogger() });
    await gw.stop();
    gw = undefined;
    expect(await rekeyLine()).toBe('ok    re-keying: every session is under the key identity links and bindings give it');
  });
});

describePg('doctor in cluster mode', () => {
  const db = useTestDatabase();
  let tmp: { dir: string; remove: () => void };
  beforeEach(() => { tmp = tempDir(); });
  afterEach(() => tmp.remove());

  it('says the next replica to start re-keys once for the cluster', async () => {
    const store = await openSessionStore(db.uri);
    const now = Date.now();
    await store.set({
      key: 'agent:home:direct:bob', sessionId: '00000000-0000-4000-8000-000000000001', agentId: 'home', channel: 'webchat', accountId: 'default', chatType: 'direct', peerId: 'bob',
      createdAt: now, updatedAt: now, state: 'active', runState: 'idle', overrides: {}, tokens: emptyTokens(), contextTokens: 0, compactionCount: 0, sessionStartedAt: now, messageCount: 2,
    });
    await store.close();
    const config = testConfig(tmp.dir, { store: db.uri, agents, bindings: toWork, session: perPeer });
    const line = (await output((out) => runDoctor(config, out))).split('\n').find((l) => l.includes('re-keying'));
    expect(line).toBe('warn  re-keying: the next replica to start moves 1 session, once for the cluster (under a database lock; put off while one of them has queued messages or is running): agent:home:direct:bob → agent:work:direct:bob');
  });
});

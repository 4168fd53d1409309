import { describe, expect, it } from 'vitest';
import { buildSessionKey, linkedPeer, parentSessionKey, parseSessionKey, type SessionKeyOptions, type SessionRoute } from '../../src/routing/session-key.ts';
import { SessionKeyError } from '../../src/core/errors.ts';

const opts = (over: Partial<SessionKeyOptions> = {}): SessionKeyOptions => ({ dmScope: 'main', threads: 'separate', identityLinks: {}, ...over });
const dm = (over: Partial<SessionRoute> = {}): SessionRoute => ({ agentId: 'main', channel: 'telegram', accountId: 'default', chatType: 'direct', peerId: '42', ...over });

describe('buildSessionKey: every form of SPEC §2', () => {
  it.each([
    ['direct, main', dm(), opts(), 'agent:main:main'],
    ['direct, per-peer', dm(), opts({ dmScope: 'per-peer' }), 'agent:main:direct:42'],
    ['direct, per-channel-peer', dm(), opts({ dmScope: 'per-channel-peer' }), 'agent:main:telegram:direct:42'],
    ['direct, per-account-channel-peer', dm({ accountId: 'work' }), opts({ dmScope: 'per-account-channel-peer' }), 'agent:main:telegram:work:direct:42'],
    ['group', { ...dm(), chatType: 'group' as const, groupId: '-1001234' }, opts({ dmScope: 'per-peer' }), 'agent:main:telegram:group:-1001234'],
    ['discord channel', { ...dm(), channel: 'discord', chatType: 'channel' as const, groupId: '555' }, opts(), 'agent:main:discord:channel:555'],
    ['discord thread', { ...dm(), channel: 'discord', chatType: 'channel' as const, groupId: '555', threadId: '777' }, opts(), 'agent:main:discord:channel:555:thread:777'],
    ['slack thread', { ...dm(), channel: 'slack', chatType: 'channel' as const, groupId: 'C01ABC', threadId: '1700000001.000100' }, opts(), 'agent:main:slack:channel:c01abc:thread:1700000001.000100'],
    ['telegram topic', { ...dm(), chatType: 'group' as const, groupId: '-100', threadId: '9', threadKind: 'topic' as const }, opts(), 'agent:main:telegram:group:-100:topic:9'],
    ['thread under threads: parent', { ...dm(), channel: 'discord', chatType: 'channel' as const, groupId: '555', threadId: '777' }, opts({ threads: 'parent' }), 'agent:main:discord:channel:555'],
    ['topic under threads: parent', { ...dm(), chatType: 'group' as const, groupId: '-100', threadId: '9', threadKind: 'topic' as const }, opts({ threads: 'parent' }), 'agent:main:telegram:group:-100'],
    ['DM thread (Slack DM thread)', dm({ channel: 'slack', peerId: 'U42', threadId: '17.1' }), opts({ dmScope: 'per-channel-peer' }), 'agent:main:slack:direct:u42:thread:17.1'],
    ['other agent', dm({ agentId: 'ops' }), opts(), 'agent:ops:main'],
    ['API session', dm({ channel: 'api', peerId: 'my-app' }), opts({ dmScope: 'per-channel-peer' }), 'agent:main:api:direct:my-app'],
    ['identity link under per-peer', dm({ channel: 'discord', peerId: '99' }), opts({ dmScope: 'per-peer', identityLinks: { alice: ['telegram:42', 'discord:99'] } }), 'agent:main:direct:alice'],
    ['identity link under per-channel-peer', dm(), opts({ dmScope: 'per-channel-peer', identityLinks: { alice: ['telegram:42'] } }), 'agent:main:telegram:direct:alice'],
    ['identity links ignored under main', dm(), opts({ identityLinks: { alice: ['telegram:42'] } }), 'agent:main:main'],
    ['unlinked peer keeps its id', dm({ peerId: '43' }), opts({ dmScope: 'per-peer', identityLinks: { alice: ['telegram:42'] } }), 'agent:main:direct:43'],
    ['uppercase is lowercased', dm({ channel: 'slack', peerId: 'U0ABC' }), opts({ dmScope: 'per-peer' }), 'agent:main:direct:u0abc'],
    ['a colon inside a value is encoded', dm({ channel: 'api', peerId: 'team:bot' }), opts({ dmScope: 'per-channel-peer' }), 'agent:main:api:direct:team%3abot'],
  ])('%s', (_name, route, options, expected) => {
    expect(buildSessionKey(route, options)).toBe(expected);
  });

  it('one person across channels is one session under per-peer with identity links', () => {
    const options = opts({ dmScope: 'per-peer', identityLinks: { alice: ['telegram:42', 'slack:U7'] } });
    expect(buildSessionKey(dm(), options)).toBe(buildSessionKey(dm({ channel: 'slack', peerId: 'U7' }), options));
  });

  it('refuses routes that cannot make a key', () => {
    expect(() => buildSessionKey(dm({ peerId: undefined }), opts())).toThrow(SessionKeyError);
    expect(() => buildSessionKey({ ...dm(), chatType: 'group' }, opts())).toThrow(/group id/);
  });
});

describe('parseSessionKey', () => {
  it.each([
    ['agent:main:main', { agentId: 'main', chatType: 'direct', dmScope: 'main' }],
    ['agent:main:direct:42', { chatType: 'direct', dmScope: 'per-peer', peerId: '42' }],
    ['agent:main:telegram:direct:42', { dmScope: 'per-channel-peer', channel: 'telegram', peerId: '42' }],
    ['agent:main:telegram:work:direct:42', { dmScope: 'per-account-channel-peer', channel: 'telegram', accountId: 'work', peerId: '42' }],
    ['agent:main:telegram:group:-100', { chatType: 'group', channel: 'telegram', groupId: '-100' }],
    ['agent:main:discord:channel:555:thread:777', { chatType: 'channel', groupId: '555', threadId: '777', threadKind: 'thread', parentKey: 'agent:main:discord:channel:555' }],
    ['agent:main:telegram:group:-100:topic:9', { threadKind: 'topic', threadId: '9', parentKey: 'agent:main:telegram:group:-100' }],
    ['agent:main:api:direct:team%3abot', { peerId: 'team:bot', channel: 'api' }],
  ])('%s', (key, expected) => {
    expect(parseSessionKey(key)).toMatchObject({ key, ...expected });
  });

  it('accepts the legacy dm segment and reads it as direct', () => {
    expect(parseSessionKey('agent:main:dm:42')).toMatchObject({ key: 'agent:main:direct:42', dmScope: 'per-peer', peerId: '42' });
    expect(parseSessionKey('agent:main:telegram:dm:42').key).toBe('agent:main:telegram:direct:42');
    expect(parseSessionKey('agent:main:telegram:work:dm:42').key).toBe('agent:main:telegram:work:direct:42');
    expect(parseSessionKey('AGENT:Main:Telegram:DM:42').key).toBe('agent:main:telegram:direct:42');
  });

  it.each(['', 'main', 'agent', 'agent:main', 'agent:main:telegram', 'agent::main', 'agent:main:telegram:group', 'agent:main:main:extra',
    'agent:main:telegram:group:1:thread', 'agent:main:telegram:group:1:reply:2', 'session:main:main', 'agent:main:telegram:work:group:1'])('rejects %j', (key) => {
    expect(() => parseSessionKey(key)).toThrow(SessionKeyError);
  });
});

describe('round trip over generated routes', () => {
  // A small deterministic PRNG so the generated cases are the same on every run.
  function rng(seed: number) {
    return () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff; };
  }
  const pick = <T,>(r: () => number, items: readonly T[]): T => items[Math.floor(r() * items.length)] as T;
  const alphabet = 'abcXYZ019-_.:% @é中';
  const word = (r: () => number) => Array.from({ length: 1 + Math.floor(r() * 10) }, () => pick(r, [...alphabet])).join('').trim() || 'x';

  it('parse(build(route)) gives back the route (lowercased) and build(parse(key)) the key, for 5000 routes', () => {
    const r = rng(42);
    for (let i = 0; i < 5000; i++) {
      const chatType = pick(r, ['direct', 'group', 'channel'] as const);
      const route: SessionRoute = {
        agentId: pick(r, ['main', 'ops', 'a-1']), channel: pick(r, ['telegram', 'discord', 'slack', 'api', 'webchat']),
        accountId: pick(r, ['default', 'work', 'acct_2']), chatType,
        ...(chatType === 'direct' ? { peerId: word(r) } : { groupId: word(r) }),
        ...(r() < 0.4 ? { threadId: word(r), threadKind: pick(r, ['thread', 'topic'] as const) } : {}),
      };
      const options = opts({ dmScope: pick(r, ['main', 'per-peer', 'per-channel-peer', 'per-account-channel-peer'] as const), threads: pick(r, ['separate', 'parent'] as const) });
      const key = buildSessionKey(route, options);
      const parsed = parseSessionKey(key);
      expect(parsed.key).toBe(key);
      expect(parsed.agentId).toBe(route.agentId.toLowerCase());
      expect(parsed.chatType).toBe(chatType);
      if (chatType === 'direct') {
        expect(parsed.dmScope).toBe(options.dmScope);
        if (options.dmScope !== 'main') expect(parsed.peerId).toBe(route.peerId!.trim().toLowerCase());
        if (options.dmScope === 'per-channel-peer' || options.dmScope === 'per-account-channel-peer') expect(parsed.channel).toBe(route.channel);
        if (options.dmScope === 'per-account-channel-peer') expect(parsed.accountId).toBe(route.accountId);
      } else {
        expect(parsed.groupId).toBe(route.groupId!.trim().toLowerCase());
        expect(parsed.channel).toBe(route.channel);
      }
      if (route.threadId && options.threads === 'separate') {
        expect(parsed.threadId).toBe(route.threadId.trim().toLowerCase());
        expect(parsed.threadKind).toBe(route.threadKind);
        expect(key.startsWith(`${parsed.parentKey}:`)).toBe(true);
      } else {
        expect(parsed.threadId).toBeUndefined();
      }
    }
  });
});

describe('session keys: sub-agents, defaults, encoding and the messages of refusals', () => {
  it('a sub-agent key is agent:<agent>:subagent:<id>, whatever else the route says, and reads back', () => {
    const key = buildSessionKey({ ...dm({ agentId: 'Ops' }), chatType: 'group', subagentId: 'A1b2' }, opts({ dmScope: 'per-peer' }));
    expect(key).toBe('agent:ops:subagent:a1b2');
    expect(parseSessionKey(key)).toEqual({ key, agentId: 'ops', chatType: 'direct', channel: 'internal', subagentId: 'a1b2' });
    expect(() => parseSessionKey('agent:ops:subagent')).toThrow('"agent:ops:subagent" is not a session key: a sub-agent key is agent:<agentId>:subagent:<id>.');
    expect(() => parseSessionKey('agent:ops:subagent:a:b')).toThrow('"agent:ops:subagent:a:b" is not a session key: a sub-agent key is agent:<agentId>:subagent:<id>.');
  });

  it("a job's isolated session is agent:<agent>:job:<jobId> and reads back (SPEC §17)", () => {
    const key = buildSessionKey({ ...dm({ agentId: 'Ops' }), jobId: 'Daily-Report' }, opts({ dmScope: 'per-peer' }));
    expect(key).toBe('agent:ops:job:daily-report');
    expect(parseSessionKey(key)).toEqual({ key, agentId: 'ops', chatType: 'direct', channel: 'internal', jobId: 'daily-report' });
  });

  it('an empty agent id is main; an empty account id is default', () => {
    expect(buildSessionKey(dm({ agentId: '' }), opts())).toBe('agent:main:main');
    expect(buildSessionKey(dm({ accountId: '' }), opts({ dmScope: 'per-account-channel-peer' }))).toBe('agent:main:telegram:default:direct:42');
  });

  it('values are trimmed; %, : and whitespace inside them are percent-encoded with two hex digits, and decoded back', () => {
    const key = buildSessionKey(dm({ channel: 'api', peerId: ' 50% a:b\tc ' }), opts({ dmScope: 'per-channel-peer' }));
    expect(key).toBe('agent:main:api:direct:50%25%20a%3ab%09c');
    expect(parseSessionKey(key).peerId).toBe('50% a:b\tc');
    expect(parseSessionKey('agent:main:telegram:my%3aacct:direct:42')).toMatchObject({ accountId: 'my:acct', key: 'agent:main:telegram:my%3aacct:direct:42' });
  });

  it('a key is read whatever its case and surrounding spaces', () => {
    expect(parseSessionKey('  Agent:Main:Telegram:Direct:42 ').key).toBe('agent:main:telegram:direct:42');
  });

  it('parentSessionKey: the key without its thread, or the key itself', () => {
    expect(parentSessionKey('agent:main:discord:channel:555:thread:777')).toBe('agent:main:discord:channel:555');
    expect(parentSessionKey('agent:main:telegram:group:-100:topic:9')).toBe('agent:main:telegram:group:-100');
    expect(parentSessionKey('Agent:Main:Main')).toBe('agent:main:main');
  });

  it('identity links apply to the channel:peer pair exactly, not under dmScope main', () => {
    const links = { identityLinks: { Alice: ['Telegram:42'] } };
    expect(linkedPeer('telegram', '42', opts({ dmScope: 'per-peer', ...links }))).toBe('Alice');
    expect(linkedPeer('TELEGRAM', '42', opts({ dmScope: 'per-peer', ...links }))).toBe('Alice');
    expect(linkedPeer('discord', '42', opts({ dmScope: 'per-peer', ...links }))).toBe('42');
    expect(linkedPeer('telegram', '4', opts({ dmScope: 'per-peer', ...links }))).toBe('4');
    expect(linkedPeer('telegram', '42', opts({ dmScope: 'main', ...links }))).toBe('42');
  });

  it.each([
    ['an empty peer id', () => buildSessionKey(dm({ peerId: '' }), opts()), 'A direct message needs a peer id to build its session key.'],
    ['a peer id of spaces', () => buildSessionKey(dm({ peerId: '   ' }), opts({ dmScope: 'per-peer' })), 'The peerId of a session key cannot be empty.'],
    ['a channel of spaces', () => buildSessionKey(dm({ channel: ' ' }), opts({ dmScope: 'per-channel-peer' })), 'The channel of a session key cannot be empty.'],
    ['an account of spaces', () => buildSessionKey(dm({ accountId: ' ' }), opts({ dmScope: 'per-account-channel-peer' })), 'The accountId of a session key cannot be empty.'],
    ['a group channel of spaces', () => buildSessionKey({ ...dm(), chatType: 'group', groupId: '1', channel: ' ' }, opts()), 'The channel of a session key cannot be empty.'],
    ['a group id of spaces', () => buildSessionKey({ ...dm(), chatType: 'group', groupId: ' ' }, opts()), 'The groupId of a session key cannot be empty.'],
    ['a thread id of spaces', () => buildSessionKey({ ...dm(), chatType: 'group', groupId: '1', threadId: ' ' }, opts()), 'The threadId of a session key cannot be empty.'],
    ['an agent id of spaces', () => buildSessionKey(dm({ agentId: ' ' }), opts()), 'The agentId of a session key cannot be empty.'],
    ['a sub-agent id of spaces', () => buildSessionKey(dm({ subagentId: ' ' }), opts()), 'The subagentId of a session key cannot be empty.'],
    ['a channel message without a group', () => buildSessionKey({ ...dm(), chatType: 'channel' }, opts()), 'A channel message needs a group id to build its session key.'],
    ['an unknown dmScope', () => buildSessionKey(dm(), opts({ dmScope: 'per-planet' as never })), 'Unknown dmScope "per-planet".'],
  ])('build refuses %s, saying so', (_name, build, message) => {
    expect(build).toThrow(SessionKeyError);
    expect(build).toThrow(message);
  });

  it.each([
    ['main:main:main', 'it must start with agent:<agentId>:'],
    ['agent::main', 'it must start with agent:<agentId>:'],
    ['agent:main', 'it has a missing or empty segment'],
    ['agent:main:direct:', 'it has a missing or empty segment'],
    ['agent:main::direct:42', 'it has a missing or empty segment'],
    ['agent:main:direct', 'a per-peer key needs a peer id'],
    ['agent:main:dm', 'a per-peer key needs a peer id'],
    ['agent:main:telegram:group', 'too few segments'],
    ['agent:main:telegram:work:direct', 'expected direct, group or channel after the channel'],
    ['agent:main:telegram:work:group:1', 'expected direct, group or channel after the channel'],
    ['agent:main:telegram:group:1:thread', 'only :thread:<id> or :topic:<id> may follow'],
    ['agent:main:telegram:group:1:reply:2', 'only :thread:<id> or :topic:<id> may follow'],
    ['agent:main:main:thread:1:2', 'only :thread:<id> or :topic:<id> may follow'],
  ])('parse refuses %j: %s', (key, why) => {
    expect(() => parseSessionKey(key)).toThrow(`"${key}" is not a session key: ${why}.`);
  });
});

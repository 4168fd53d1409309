import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { testConfig } from '../helpers/gateway.ts';
import { useTempDir } from '../helpers/fixtures.ts';

describe('config: binding ids, MCP server shapes, tool names and tokens', () => {
  const tmp = useTempDir();

  const refusal = (overrides: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) => {
    try {
      testConfig(tmp.dir, overrides, env);
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('expected the config to be refused');
  };
  const agents = { list: [{ id: 'main' }, { id: 'work' }] };

  it('a Discord snowflake written as a JSON number is refused ("quote it"); a short number is read as its digits', () => {
    // 123456789012345678 is read by JSON as 123456789012345680: the id is already wrong.
    const message = refusal({ agents, bindings: [{ agentId: 'work', match: { channel: 'discord', guildId: JSON.parse('123456789012345678') as number } }] });
    expect(message).toContain('bindings.0.match.guildId: 123456789012345680 is too long to be exact as a JSON number');
    expect(message).toContain('quote the id');
    expect(refusal({ agents, bindings: [{ agentId: 'work', match: { channel: 'discord', peer: { kind: 'channel', id: 2 ** 60 } } }] })).toContain('bindings.0.match.peer.id: 1152921504606847000 is too long');
    const ok = testConfig(tmp.dir, { agents, bindings: [{ agentId: 'work', match: { channel: 'telegram', peer: { kind: 'group', id: -1001234567890 } } }, { agentId: 'work', match: { channel: 'discord', guildId: '123456789012345678' } }] });
    expect(ok.bindings.map((b) => b.match.peer?.id ?? b.match.guildId)).toEqual(['-1001234567890', '123456789012345678']);
  });

  it('a Discord guild binding on direct messages can never match: a config error naming the entry', () => {
    const message = refusal({ agents, bindings: [{ agentId: 'work', match: { channel: 'discord' } }, { agentId: 'work', match: { channel: 'discord', guildId: '42', peer: { kind: 'direct', id: '7' } } }] });
    expect(message).toContain('bindings[1].match: a Discord direct message has no guild');
    expect(message).not.toContain('bindings[0]');
  });

  it('guild and team ids differing only in case are the same match', () => {
    expect(refusal({ agents, bindings: [{ agentId: 'main', match: { channel: 'slack', teamId: 'T1' } }, { agentId: 'work', match: { channel: 'slack', teamId: 't1' } }] }))
      .toContain('bindings[1].match: the same match as bindings[0]');
  });

  it('an MCP server matching neither shape says what is wrong in the shape it resembles', () => {
    expect(refusal({ mcp: { servers: { fx: { command: 'node', args: 'server.js' } } } })).toContain('mcp.servers.fx.args: expected a list ([ ... ]), got "server.js"');
    expect(refusal({ mcp: { servers: { fx: { url: 'http://127.0.0.1:1/mcp', headers: 'x' } } } })).toContain('mcp.servers.fx.headers: expected an object ({ ... }), got "x"');
    expect(refusal({ mcp: { servers: { fx: { url: 'http://127.0.0.1:1/mcp', comand: 'x' } } } })).toContain('mcp.servers.fx: unknown key "comand"');
    expect(refusal({ mcp: { servers: { fx: {} } } })).toContain('mcp.servers.fx: expected an object with "command" or an object with "url", got {}');
    expect(refusal({ mcp: { servers: { fx: {} } } })).not.toContain('Invalid input');
  });

  it('group:mcp:<server> in tools allow/deny is read as mcp:<server>', () => {
    const config = testConfig(tmp.dir, { agents: { defaults: { tools: { allow: ['group:mcp:fx', 'mcp:other', 'group:memory'], deny: ['group:mcp:bad'] } }, list: [{ id: 'main', tools: { allow: ['group:mcp:own'] } }] } });
    expect(config.agents[0]!.tools.allow).toEqual(['mcp:own']);
    expect(config.agentDefaults.tools.allow).toEqual(['mcp:fx', 'mcp:other', 'group:memory']);
    expect(config.agentDefaults.tools.deny).toEqual(['mcp:bad']);
  });

  it('channel tokens and keys lose surrounding whitespace (a trailing newline from .env)', () => {
    const config = loadConfig({
      cwd: tmp.dir, dotenv: false,
      env: { TELEGRAM_BOT_TOKEN: '123:abc\n', DISCORD_BOT_TOKEN: ' disc-token\r\n', SLACK_BOT_TOKEN: 'xoxb-1\n', SLACK_APP_TOKEN: 'xapp-1 ', OPENAI_API_KEY: 'sk-key\n' },
      overrides: { stateDir: `${tmp.dir}/data`, channels: { telegram: { accounts: { second: { botToken: '456:def\n' } } } } },
    });
    expect(config.channels.telegram.map((a) => a.botToken)).toEqual(['123:abc', '456:def']);
    expect(config.channels.discord.map((a) => a.token)).toEqual(['disc-token']);
    expect(config.channels.slack.map((a) => [a.botToken, a.appToken])).toEqual([['xoxb-1', 'xapp-1']]);
    expect(config.providers.default!.apiKey).toBe('sk-key');
  });
});

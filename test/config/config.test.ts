import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { ConfigError } from '../../src/core/errors.ts';
import { useTempDir } from '../helpers/fixtures.ts';

describe('loadConfig', () => {
  const tmp = useTempDir();
  const load = (env: NodeJS.ProcessEnv = {}, configPath?: string) => loadConfig({ cwd: tmp.dir, env, configPath });

  it('fills every default of SPEC §9 with no file and no environment', () => {
    const c = load();
    expect(c.gateway).toMatchObject({ host: '127.0.0.1', port: 18789, authToken: '', maxBodyBytes: 1_048_576 });
    expect(c.stateDir).toBe(path.join(tmp.dir, 'data'));
    expect(c.store).toBe(`sqlite://${path.join(tmp.dir, 'data', 'sessions.sqlite')}`);
    expect(c.providers.default).toMatchObject({ kind: 'offline', contextWindow: 128000, maxTokens: 4096, correlationHeader: 'X-Switchboard-Correlation-Id' });
    expect(c.agentDefaults).toMatchObject({ provider: 'default', workspace: path.join(tmp.dir, 'workspace'), maxConcurrent: 4, maxIterationsPerBatch: 20,
      bootstrapMaxChars: 20000, bootstrapTotalMaxChars: 150000, compaction: { enabled: true, reserveTokens: 16384, keepRecentTokens: 20000, memoryFlush: true },
      contextPruning: { mode: 'cache-ttl', ttl: 300_000, keepLastAssistants: 3 } });
    expect(c.agents).toEqual([expect.objectContaining({ id: 'main', providerId: 'default' })]);
    expect(c.session).toMatchObject({ dmScope: 'main', threads: 'separate', identityLinks: {}, maxActiveSessions: 10000, resetTriggers: ['/new', '/reset'], notifyOnReset: true, resetArchiveRetentionDays: 30 });
    expect(c.channels.telegram[0]).toMatchObject({ accountId: 'default', enabled: false, mode: 'polling', dmPolicy: 'pairing', groupPolicy: 'allowlist', requireMention: true });
    expect(c.channels.slack[0]).toMatchObject({ mode: 'socket' });
    expect(c.backgroundExecution).toEqual({
      enabled: false, maxConcurrentBackgroundTurns: 3, maxBatchesPerGoal: 10, autoResumeOnStartup: true, tokenBudget: 128000, maxWallClockMinutes: 360, maxToolCalls: 1000,
    });
    expect(c.tools).toEqual({ timeoutSeconds: 60, maxResultChars: 50000, sessions: { visibility: 'tree', maxSpawnDepth: 2, maxChildren: 5 } });
    expect(c.agentDefaults.tools).toEqual({ preset: 'messaging', allow: [], deny: [] });
    expect(c.agents[0]!.tools).toEqual({ preset: 'messaging', allow: [], deny: [] });
  });

  it('reads JSON5 from switchboard.json, the environment and .env; the environment wins', () => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), `{
      // comments and trailing commas are fine
      gateway: { port: 9000, },
      session: { dmScope: 'per-peer' },
    }`);
    writeFileSync(path.join(tmp.dir, '.env'), 'OPENAI_API_KEY=sk-from-dotenv\nSWITCHBOARD_PORT=9100\n');
    const c = load({ SWITCHBOARD_PORT: '9200' });
    expect(c.gateway.port).toBe(9200);
    expect(c.session.dmScope).toBe('per-peer');
    expect(c.providers.default).toMatchObject({ kind: 'openai', apiKey: 'sk-from-dotenv', model: 'gpt-4o-mini' });
    expect(c.secrets).toContain('sk-from-dotenv');
  });

  it('a channel whose token is present is enabled', () => {
    const c = load({ TELEGRAM_BOT_TOKEN: '123:abc', TELEGRAM_API_ROOT: 'http://127.0.0.1:1/', SLACK_BOT_TOKEN: 'xoxb-1', SLACK_API_URL: 'http://127.0.0.1:2/api' });
    expect(c.channels.telegram[0]).toMatchObject({ enabled: true, botToken: '123:abc', apiRoot: 'http://127.0.0.1:1' });
    expect(c.channels.slack[0]).toMatchObject({ enabled: true, apiUrl: 'http://127.0.0.1:2/api/' });
    expect(c.channels.discord[0]!.enabled).toBe(false);
  });

  it('expands several accounts, each merged over the channel defaults', () => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({
      channels: { telegram: { dmPolicy: 'open', accounts: { work: { botToken: 'w-token', allowFrom: [42] }, home: { botToken: 'h-token', dmPolicy: 'allowlist' } } } },
    }));
    const c = load();
    expect(c.channels.telegram.map((a) => [a.accountId, a.enabled, a.dmPolicy, a.allowFrom])).toEqual([['work', true, 'open', ['42']], ['home', true, 'allowlist', []]]);
  });

  it('an invalid value stops start-up naming the key and what was expected', () => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({ session: { dmScope: 'per-person', reset: { atHour: 25 } }, gatway: {} }));
    let error: ConfigError | undefined;
    try { load(); } catch (e) { error = e as ConfigError; }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error!.code).toBe('CONFIG_INVALID');
    expect(error!.message).toContain('switchboard.json');
    expect(error!.issues.join('\n')).toMatch(/session\.dmScope: .*"main"/);
    expect(error!.issues.join('\n')).toMatch(/session\.reset\.atHour: .*23/);
    expect(error!.issues.join('\n')).toMatch(/unknown key "gatway"/);
  });

  it('names the environment variable a bad value came from', () => {
    expect(() => load({ SWITCHBOARD_PORT: 'eighty' })).toThrow(/gateway\.port \(from SWITCHBOARD_PORT\)/);
  });

  it('rejects a bad time zone and broken JSON clearly', () => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({ session: { reset: { timezone: 'Europe/Atlantis' } } }));
    expect(() => load()).toThrow(/session\.reset\.timezone: expected an IANA time zone/);
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), '{ nope');
    expect(() => load()).toThrow(/Cannot parse .*switchboard\.json/);
    expect(() => load({}, 'missing.json')).toThrow(/does not exist/);
  });
});

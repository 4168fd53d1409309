import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { knownKeysAt } from '../../src/config/config-errors.ts';
import { loadConfig } from '../../src/config/load.ts';
import { configSchema } from '../../src/config/schema.ts';
import { didYouMean } from '../../src/core/did-you-mean.ts';
import { useTempDir } from '../helpers/fixtures.ts';

describe('config errors an operator can act on', () => {
  const tmp = useTempDir();

  const load = (file: string | undefined, env: NodeJS.ProcessEnv = {}, extra: Parameters<typeof loadConfig>[0] = {}) => {
    if (file !== undefined) writeFileSync(path.join(tmp.dir, 'switchboard.json'), file);
    try {
      loadConfig({ cwd: tmp.dir, env, dotenv: false, ...extra });
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('expected the config to be refused');
  };

  it('suggests the key meant for an unknown one, at any depth', () => {
    const message = load('{ gateway: { prot: 8080 }, session: { dmScop: "per-peer" }, channels: { telegram: { accounts: { bot1: { botTokn: "x" } } } } }');
    expect(message).toContain('gateway: unknown key "prot" (did you mean "port"?)');
    expect(message).toContain('session: unknown key "dmScop" (did you mean "dmScope"?)');
    expect(message).toContain('channels.telegram.accounts.bot1: unknown key "botTokn" (did you mean "botToken"?)');
    expect(load('{ nothingLikeIt: 1 }')).toMatch(/\(root\): unknown key "nothingLikeIt"$/m);
  });

  it('says what was expected and what was given, and where it came from', () => {
    expect(load(undefined, { SWITCHBOARD_PORT: 'abc' })).toContain('gateway.port (from SWITCHBOARD_PORT): expected a number, got "abc"');
    expect(load(undefined, {}, { overrides: { gateway: { port: 'abc' } }, overrideSources: { 'gateway.port': '--port' } })).toContain('gateway.port (from --port): expected a number, got "abc"');
    expect(load('{ gateway: { maxBodyBytes: "lots" } }')).toContain('gateway.maxBodyBytes: expected a number, got "lots"');
    expect(load('{ session: { dmScope: "per-pear" } }')).toContain('session.dmScope: expected one of "main", "per-peer", "per-channel-peer", "per-account-channel-peer", got "per-pear" (did you mean "per-peer"?)');
  });

  it('shows the line and column of a JSON5 syntax error', () => {
    const message = load('{\n  gateway: {\n    port: 8080,,\n  },\n}\n');
    expect(message).toContain('at line 3, column 16:');
    expect(message).toContain('  3 |     port: 8080,,\n    |                ^');
  });

  it('knows the keys of nested, defaulted and record schemas', () => {
    expect(knownKeysAt(configSchema, ['gateway'])).toContain('authToken');
    expect(knownKeysAt(configSchema, ['channels', 'slack', 'accounts', 'x'])).toContain('signingSecret');
    expect(didYouMean('telgram', ['telegram', 'discord', 'slack'])).toBe('telegram');
    expect(didYouMean('whatsapp', ['telegram', 'discord', 'slack'])).toBeUndefined();
  });
});

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { useTempDir } from '../helpers/fixtures.ts';

describe('config: a binding on the API channel (issue 12)', () => {
  const tmp = useTempDir();

  const load = (file: string) => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), file);
    return loadConfig({ cwd: tmp.dir, env: {}, dotenv: false, overrides: { stateDir: path.join(tmp.dir, 'data') } });
  };
  const refusal = (file: string) => {
    try {
      load(file);
    } catch (error) {
      return { code: (error as { code?: string }).code, message: (error as Error).message };
    }
    throw new Error('expected the config to be refused');
  };

  it('is refused at start, naming the entry and saying the API picks its agent by "model"', () => {
    const refused = refusal(`{
      agents: { list: [{ id: "main" }, { id: "work" }] },
      bindings: [
        { agentId: "work", match: { channel: "telegram" } },
        { agentId: "work", match: { channel: "api", peer: { kind: "direct", id: "my-app" } } },
      ],
    }`);
    expect(refused.code).toBe('CONFIG_INVALID');
    expect(refused.message).toContain('bindings[1].match.channel: the API picks its agent by "model" (an agent id); bindings do not apply to it');
    expect(refused.message).not.toContain('bindings[0]');
  });

  it('is refused without a peer too (a channel-wide API binding never routes either)', () => {
    expect(refusal('{ agents: { list: [{ id: "main" }, { id: "work" }] }, bindings: [{ agentId: "work", match: { channel: "api" } }] }').message)
      .toContain('bindings[0].match.channel: the API picks its agent by "model" (an agent id); bindings do not apply to it');
  });

  it('bindings on the chat channels are still accepted', () => {
    const config = load('{ agents: { list: [{ id: "main" }, { id: "work" }] }, bindings: [{ agentId: "work", match: { channel: "webchat" } }, { agentId: "work", match: { channel: "cli" } }] }');
    expect(config.bindings.map((b) => b.match.channel)).toEqual(['webchat', 'cli']);
  });
});

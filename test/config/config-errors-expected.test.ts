import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { useTempDir } from '../helpers/fixtures.ts';

/** SPEC §9: an invalid file names the key and what was expected (issue 13). */
describe('config errors say what was expected', () => {
  const tmp = useTempDir();

  const refusal = (file: string) => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), file);
    try {
      loadConfig({ cwd: tmp.dir, env: {}, dotenv: false, overrides: { stateDir: path.join(tmp.dir, 'data') } });
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('expected the config to be refused');
  };

  it('an MCP server with both "command" and "url" is told to pick one', () => {
    const message = refusal('{ mcp: { servers: { foo: { command: "node", args: ["server.js"], url: "http://127.0.0.1:9000/mcp" } } } }');
    expect(message).toContain('mcp.servers.foo: expected "command" (stdio) or "url" (Streamable HTTP), not both');
    expect(message).not.toContain('another shape');
  });

  it('an MCP server name that is not a valid name is reported with the name and the rule', () => {
    const message = refusal('{ mcp: { servers: { "a.b": { command: "node" } } } }');
    expect(message).toContain('mcp.servers: "a.b" is not a valid name: expected 1-32 letters, digits, - or _');
    expect(message).not.toContain('Invalid key in record');
  });

  it('an account name that is not a valid id, or a reserved word, is reported with the name and the rule', () => {
    const message = refusal('{ channels: { telegram: { accounts: { Work: { botToken: "1:a" } } }, slack: { accounts: { main: {} } } } }');
    expect(message).toContain('channels.telegram.accounts: "Work" is not a valid name: expected a lowercase account id');
    expect(message).toContain('channels.slack.accounts: "main" is not a valid name: this word is reserved in session keys');
    expect(message).not.toContain('Invalid key in record');
  });
});

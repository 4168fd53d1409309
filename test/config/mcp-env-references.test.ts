import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.ts';
import { testConfig } from '../helpers/gateway.ts';
import { useTempDir } from '../helpers/fixtures.ts';

describe('config: ${NAME} references in MCP servers', () => {
  const tmp = useTempDir();

  it('a value put inside a header (Bearer ${TOKEN}) is a secret on its own: a log line holding the bare token shows it redacted', () => {
    const config = testConfig(tmp.dir, {
      mcp: { servers: { search: { url: 'http://127.0.0.1:9/mcp', headers: { Authorization: 'Bearer ${SEARCH_TOKEN}' } } } },
    }, { SEARCH_TOKEN: 'tok-9f8e7d6c5b' });
    expect(config.mcp.servers.search).toMatchObject({ headers: { Authorization: 'Bearer tok-9f8e7d6c5b' } });
    expect(config.secrets).toContain('tok-9f8e7d6c5b');
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _encoding, done) { lines.push(String(chunk)); done(); } });
    createLogger({ level: 'info', secrets: config.secrets, destination: sink }).info({ detail: 'server said tok-9f8e7d6c5b is wrong' }, 'mcp: refused');
    expect(lines.join('')).toContain('mcp: refused');
    expect(lines.join('')).not.toContain('tok-9f8e7d6c5b');
  });

  it('a disabled server may name a variable that is not set; an enabled one stops start-up naming it', () => {
    const servers = { fx: { command: 'node', env: { KEY: '${NOT_SET_ANYWHERE}' } } };
    const disabled = testConfig(tmp.dir, { mcp: { servers: { fx: { ...servers.fx, enabled: false } } } });
    expect(disabled.mcp.servers.fx).toMatchObject({ enabled: false });
    expect(() => testConfig(tmp.dir, { mcp: { servers } })).toThrow('mcp.servers.fx.env.KEY names ${NOT_SET_ANYWHERE}, which is not set');
  });
});

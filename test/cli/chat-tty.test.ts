import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/gateway.ts';
import { bin, cleanEnv } from '../helpers/process.ts';

// util-linux `script` gives the command a terminal, as a person running `switchboard chat` has.
const script = ['/usr/bin/script', '/bin/script'].find((p) => existsSync(p));

describe.skipIf(!script)('switchboard chat in a terminal', () => {
  it('writes its warnings as readable lines, not JSON', async () => {
    const tmp = tempDir();
    try {
      writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({ mcp: { servers: { gone: { command: path.join(tmp.dir, 'no-such-server') } } } }));
      const child = spawn(script!, ['-qec', `${process.execPath} ${bin} chat --user alice`, '/dev/null'], { cwd: tmp.dir, env: cleanEnv(tmp.dir, { NO_COLOR: '1' }) });
      let out = '';
      const warned = new Promise<void>((resolve) => {
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('MCP server gone is unavailable')) resolve();
        });
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      await warned;
      child.stdin.write('/exit\n');
      await exited;
      const line = out.split(/\r?\n/).find((l) => l.includes('MCP server gone is unavailable'))!;
      expect(line).toMatch(/\[\d\d:\d\d:\d\d\] WARN: MCP server gone is unavailable \(spawn .*no-such-server ENOENT\); its tools are left out/);
      expect(out).not.toContain('"level":40');
    } finally {
      tmp.remove();
    }
  }, 30_000);
});

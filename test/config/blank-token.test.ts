import { describe, expect, it } from 'vitest';
import { startTestGateway, tempDir, testConfig } from '../helpers/gateway.ts';

describe('a blank auth token is no token', () => {
  const tmp = tempDir('switchboard-blank-token-');

  it('is read as empty, from the file and from the environment, and keeps a real token without its padding', () => {
    expect(testConfig(tmp.dir, { gateway: { authToken: ' \t \n' } }).gateway.authToken).toBe('');
    expect(testConfig(tmp.dir, {}, { SWITCHBOARD_AUTH_TOKEN: '   ' }).gateway.authToken).toBe('');
    expect(testConfig(tmp.dir, { gateway: { authToken: '  real-token-123 ' } }).gateway.authToken).toBe('real-token-123');
  });

  it('fails the non-loopback check: the gateway refuses to start on 0.0.0.0 with a whitespace-only token', async () => {
    await expect(startTestGateway({ dir: tmp.dir, config: { gateway: { host: '0.0.0.0', authToken: '    ' } } })).rejects.toThrow(/authToken/);
    await expect(startTestGateway({ dir: tmp.dir, config: { gateway: { host: '0.0.0.0' } }, env: { SWITCHBOARD_AUTH_TOKEN: '\t' } })).rejects.toThrow(/authToken/);
    tmp.remove();
  });
});

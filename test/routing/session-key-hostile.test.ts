import { describe, expect, it } from 'vitest';
import { buildSessionKey, parseSessionKey } from '../../src/routing/session-key.ts';

const options = { dmScope: 'per-peer' as const, threads: 'separate' as const, identityLinks: {} };
const dm = (peerId: string) => buildSessionKey({ agentId: 'main', channel: 'telegram', accountId: 'default', chatType: 'direct', peerId }, options);

describe('session keys of hostile ids', () => {
  it('percent-encodes NUL and other control characters, and reads them back', () => {
    expect(dm('a\u0000b\u0007c\u007f')).toBe('agent:main:direct:a%00b%07c%7f');
    expect(parseSessionKey(dm('a\u0000b\u0007c\u007f')).peerId).toBe('a\u0000b\u0007c\u007f');
  });

  it('turns an unpaired surrogate into U+FFFD and keeps a paired one', () => {
    expect(dm('x\ud800y')).toBe('agent:main:direct:x\ufffdy');
    expect(dm('x\udfffy')).toBe('agent:main:direct:x\ufffdy');
    expect(dm('x\ud83d\ude00y')).toBe('agent:main:direct:x\ud83d\ude00y');
  });
});

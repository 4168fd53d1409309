import { describe, expect, it } from 'vitest';
import { scrubSecrets, scrubValue, serializeError } from '../../src/core/secrets.ts';

const SECRET = 'sk-live-0123456789';

describe('secret scrubbing', () => {
  it('replaces every occurrence of a secret of 6 characters or more', () => {
    expect(scrubSecrets(`a ${SECRET} b ${SECRET}`, [SECRET])).toBe('a [redacted] b [redacted]');
    expect(scrubSecrets('short abc', ['abc'])).toBe('short abc');
  });

  it('a secret deep in a cause chain is scrubbed too, past the depth where causes are cut short', () => {
    let error = new Error(`innermost ${SECRET}`);
    for (let i = 0; i < 10; i++) error = new Error(`level ${i} ${SECRET}`, { cause: error });
    const text = JSON.stringify(serializeError(error, [SECRET]));
    expect(text).not.toContain(SECRET);
    expect(text).toContain('level 9 [redacted]');
    expect(JSON.stringify(scrubValue({ err: error }, [SECRET]))).not.toContain(SECRET);
  });
});

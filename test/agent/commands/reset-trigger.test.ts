import { describe, expect, it } from 'vitest';
import { matchResetTrigger } from '../../../src/agent/commands/commands.ts';

const triggers = ['/new', '/reset'];

describe('reset triggers (SPEC §3: case-insensitive, alone or followed by a space)', () => {
  it('matches a trigger alone, followed by a space or a line, in any case', () => {
    expect(matchResetTrigger('/new', triggers)).toEqual({ trigger: '/new', rest: '' });
    expect(matchResetTrigger('  /RESET  ', triggers)).toEqual({ trigger: '/reset', rest: '' });
    expect(matchResetTrigger('/New tell me a joke', triggers)).toEqual({ trigger: '/new', rest: 'tell me a joke' });
    expect(matchResetTrigger('/reset\nsecond line', triggers)).toEqual({ trigger: '/reset', rest: 'second line' });
  });

  it('matches the Telegram form /trigger@botname, with or without text after it', () => {
    expect(matchResetTrigger('/new@Switch_board_bot', triggers)).toEqual({ trigger: '/new', rest: '' });
    expect(matchResetTrigger('/NEW@my.bot   hello there', triggers)).toEqual({ trigger: '/new', rest: 'hello there' });
    expect(matchResetTrigger('/reset@bot\nnext', triggers)).toEqual({ trigger: '/reset', rest: 'next' });
  });

  it('leaves everything else alone', () => {
    for (const text of ['hello', '/newer', '/news today', '/new@', '/new@bot!', 'please /new', '/renew', 'new', '/reset@ bot', 'me@/new']) {
      expect(matchResetTrigger(text, triggers), text).toBeUndefined();
    }
  });

  it('takes triggers with regular-expression characters literally', () => {
    expect(matchResetTrigger('!start+@bot go', ['!start+'])).toEqual({ trigger: '!start+', rest: 'go' });
    expect(matchResetTrigger('!startt@bot go', ['!start+'])).toBeUndefined();
  });
});

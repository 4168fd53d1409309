import { describe, expect, it } from 'vitest';
import type { QueueConfig } from '../../src/config/queue-mode.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { QueueModes, realQueueTimers } from '../../src/gateway/queue-mode.ts';
import { capturingLogger } from '../helpers/log-capture.ts';

const message = (channel: InboundMessage['channel']): InboundMessage => ({
  id: 'm1', channel, accountId: 'default', chatType: 'direct', chatId: '42', peerId: '42', sender: { id: '42' }, text: 'hi', attachments: [], mentionsBot: false, receivedAt: 0,
});

describe('queue modes in cluster mode', () => {
  const config: QueueConfig = { mode: 'collect', debounceMs: 1500, byChannel: { telegram: 'steer' } };

  it('fall back to followup, said in one log line at start', () => {
    const { logger, lines } = capturingLogger();
    const modes = new QueueModes({ config, timers: realQueueTimers, logger, cluster: true, interrupt: () => false });
    expect(modes.modeOf(message('telegram'))).toBe('followup');
    expect(modes.modeOf(message('webchat'))).toBe('followup');
    const said = lines.filter((l) => /queue modes/.test(String(l.msg)));
    expect(said).toHaveLength(1);
    expect(said[0]!.level).toBe(40); // warn
  });

  it('one machine applies the configured modes and logs nothing about them', () => {
    const { logger, lines } = capturingLogger();
    const modes = new QueueModes({ config, timers: realQueueTimers, logger, cluster: false, interrupt: () => false });
    expect(modes.modeOf(message('telegram'))).toBe('steer');
    expect(modes.modeOf(message('webchat'))).toBe('collect');
    expect(lines.filter((l) => /queue modes/.test(String(l.msg)))).toHaveLength(0);
  });
});

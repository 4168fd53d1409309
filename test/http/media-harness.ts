import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { createWebchatChannel, type WebchatChannel } from '../../channels/webchat/index.ts';
import { TurnEvents } from '../../src/agent/turn-events.ts';
import type { AgentConfig, ResolvedConfig } from '../../src/config/resolved.ts';
import type { Submission, TurnResult } from '../../src/core/channel-adapter.ts';
import { systemClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage, OutboundMessage } from '../../src/core/message.ts';
import { createHttpApp, type HttpApp } from '../../src/http/app.ts';
import { mountMediaRoutes } from '../../src/http/media-routes.ts';
import { mediaBodyLimits } from '../../src/http/media-upload.ts';
import { mountOpenAIRoutes } from '../../src/http/openai-routes.ts';
import { mountWebchatRoutes } from '../../src/http/webchat-routes.ts';
import { MemoryMediaStore } from '../helpers/memory-media-store.ts';

export const TOKEN = 'media-test-token';
export const auth = { authorization: `Bearer ${TOKEN}` };

/**
 * The real HTTP app (auth, body limits, JSON errors) with the web chat (the real channel), the OpenAI routes and
 * the media route over an in-memory media store; the gateway is a sink that records each message and answers
 * with `reply(message)`.
 */
export interface MediaWorld {
  app: HttpApp;
  store: MemoryMediaStore;
  webchat: WebchatChannel;
  received: InboundMessage[];
  /** What the turn answers (default: `ok` and no files). */
  reply: (message: InboundMessage) => OutboundMessage[];
  /** `app.request` with the bearer token and a JSON body. */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  /** Serves the app on a free loopback port (for a browser); returns its URL. */
  listen(): Promise<string>;
  close(): Promise<void>;
}

export async function startMediaWorld(options: { maxBytes?: number; maxBodyBytes?: number; authToken?: string; mounts?: ((app: HttpApp) => void)[] } = {}): Promise<MediaWorld> {
  const store = new MemoryMediaStore();
  const received: InboundMessage[] = [];
  const mediaConfig = { maxBytes: options.maxBytes ?? 64 * 1024 };
  const maxBodyBytes = options.maxBodyBytes ?? 32 * 1024;
  const authToken = options.authToken ?? TOKEN;
  let server: ServerType | undefined;
  const world: MediaWorld = {
    app: undefined as unknown as HttpApp,
    store, received,
    webchat: createWebchatChannel({ clock: systemClock }),
    reply: () => [{ text: 'ok' }],
    post: async (path, body, headers = {}) => world.app.request(path, {
      method: 'POST', headers: { ...(authToken ? auth : {}), 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body),
    }),
    listen: async () => {
      const started = await new Promise<ServerType>((resolve) => {
        const s: ServerType = serve({ fetch: world.app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
      });
      server = started;
      return `http://127.0.0.1:${(started.address() as AddressInfo).port}`;
    },
    close: async () => {
      await world.webchat.stop();
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    },
  };
  const sink = async (message: InboundMessage): Promise<Submission> => {
    received.push(message);
    const replies = world.reply(message);
    const result: TurnResult = {
      sessionKey: `agent:main:${message.channel}:direct:${message.peerId}`, sessionId: 'session-1', correlationId: message.correlationId ?? 'c',
      replies, usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 }, usageEstimated: false, model: 'gpt-test', outcome: 'replied',
    };
    return { status: 'accepted', sessionKey: result.sessionKey, correlationId: result.correlationId, done: Promise.resolve(result) };
  };
  await world.webchat.start(sink);
  const agent = { id: 'main', name: 'Main', model: 'gpt-test', providerId: 'default' } as AgentConfig;
  const config = { agents: [agent], providers: [] } as unknown as Pick<ResolvedConfig, 'agents' | 'providers'>;
  world.app = createHttpApp({
    authToken, maxBodyBytes, logger: silentLogger(), channelRoutes: [],
    bodyLimits: mediaBodyLimits(maxBodyBytes, mediaConfig),
    mounts: [
      mountWebchatRoutes({ channel: world.webchat, authToken, media: store, mediaConfig }),
      mountOpenAIRoutes({
        config, sink, events: new TurnEvents(silentLogger()), clock: systemClock, logger: silentLogger(), startedAt: Date.now(),
        isClosing: () => false, authToken, media: store, mediaConfig,
      }),
      mountMediaRoutes({ media: store }),
      ...(options.mounts ?? []),
    ],
  });
  return world;
}

/** Some bytes that look like a PNG (the signature, then noise). */
export function pngBytes(size = 300): Buffer {
  const bytes = Buffer.alloc(size, 7);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(bytes);
  for (let i = 8; i < size; i++) bytes[i] = (i * 31) % 251;
  return bytes;
}

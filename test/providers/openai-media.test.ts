import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OfflineProvider } from '../../src/providers/offline.ts';
import { OpenAIProvider } from '../../src/providers/openai.ts';
import type { ChatMessage, Provider, ToolSchema } from '../../src/providers/types.ts';
import { startFakeOpenAI, textOf, type FakeOpenAI } from '../fakes/fake-openai.ts';

// Issue 28: images as `image_url` parts, image-free requests byte for byte as before, transcription.

const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, ...Array.from({ length: 62 }, (_, i) => i)]);
const pngUrl = `data:image/png;base64,${png.toString('base64')}`;
const jpeg = Buffer.alloc(1234, 7);
const jpegUrl = `data:image/jpeg;base64,${jpeg.toString('base64')}`;

describe('OpenAI provider: images and transcription', () => {
  let fake: FakeOpenAI;
  const provider = (maxRetries = 0, timeoutMs = 5000) => new OpenAIProvider({
    id: 'p', apiKey: 'sk-test', baseUrl: fake.baseURL, model: 'gpt-test', contextWindow: 8000, maxTokens: 100,
    correlationHeader: 'x-correlation-id', maxRetries, timeoutMs,
  });

  beforeEach(async () => { fake = await startFakeOpenAI(); });
  afterEach(() => fake.close());

  describe('images', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You see.' },
      { role: 'user', content: 'what is this?', images: [{ url: pngUrl, tokens: 85 }, { url: jpegUrl, tokens: 255, width: 512, height: 512 }] },
      { role: 'assistant', content: 'a picture' },
      { role: 'user', content: '', images: [{ url: 'https://example.com/cat.png', tokens: 85 }] },
    ];

    for (const streamed of [false, true]) {
      it(`sends a user message's images as image_url parts after its text (${streamed ? 'streamed' : 'not streamed'})`, async () => {
        const response = await provider().complete({ model: 'gpt-test', messages, correlationId: 'c-img' }, streamed ? { onDelta: () => undefined } : {});
        expect(response.content).toBe('echo: ');
        const request = fake.requests[0]!;
        expect(request.body.stream).toBe(streamed);
        expect(request.body.messages[1]!.content).toEqual([
          { type: 'text', text: 'what is this?' },
          { type: 'image_url', image_url: { url: pngUrl } },
          { type: 'image_url', image_url: { url: jpegUrl } },
        ]);
        // Text omitted when the message has none; an https URL passes as it is.
        expect(request.body.messages[3]!.content).toEqual([{ type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }]);
        expect(request.images).toEqual([
          { message: 1, part: 1, url: pngUrl, mime: 'image/png', size: png.length },
          { message: 1, part: 2, url: jpegUrl, mime: 'image/jpeg', size: jpeg.length },
          { message: 3, part: 0, url: 'https://example.com/cat.png' },
        ]);
        // The data URL arrives intact: the decoded bytes are the image's.
        expect(Buffer.from(request.images[0]!.url.split(',')[1]!, 'base64').equals(png)).toBe(true);
        expect(textOf(request.body.messages[1]!.content)).toBe('what is this?');
        // Other messages keep their plain string content.
        expect(request.body.messages[0]!.content).toBe('You see.');
        expect(request.body.messages[2]!.content).toBe('a picture');
      });
    }

    it('a user name is kept beside the image parts', async () => {
      await provider().complete({ model: 'gpt-test', messages: [{ role: 'user', name: 'Ann Lee', content: 'look', images: [{ url: pngUrl, tokens: 85 }] }], correlationId: 'c-name' });
      expect(fake.requests[0]!.raw).toContain(`{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"${pngUrl}"}}],"name":"Ann_Lee"}`);
    });
  });

  describe('a request without images is the same bytes as before images existed', () => {
    const tools: ToolSchema[] = [{ name: 'add', description: 'adds', parameters: { type: 'object', properties: {} } }];
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', name: 'Ann Lee', content: 'hi "there"\n' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'add', arguments: '{"a":1}' }] },
      { role: 'tool', content: '{"sum":1}', toolCallId: 'c1' },
      { role: 'assistant', content: 'done' },
      { role: 'user', content: 'thanks', images: [] },
    ];
    // Written by hand from the input above (not produced by the code under test).
    const golden = String.raw`{"model":"gpt-test","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"hi \"there\"\n","name":"Ann_Lee"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\":1}"}}]},{"role":"tool","content":"{\"sum\":1}","tool_call_id":"c1"},{"role":"assistant","content":"done"},{"role":"user","content":"thanks"}],"max_completion_tokens":100,"tools":[{"type":"function","function":{"name":"add","description":"adds","parameters":{"type":"object","properties":{}}}}],`;

    it('not streamed', async () => {
      await provider().complete({ model: 'gpt-test', messages, tools, correlationId: 'c-bytes' });
      expect(fake.requests[0]!.raw).toBe(`${golden}"stream":false}`);
      expect(fake.requests[0]!.images).toEqual([]);
    });

    it('streamed', async () => {
      await provider().complete({ model: 'gpt-test', messages, tools, correlationId: 'c-bytes' }, { onDelta: () => undefined });
      expect(fake.requests[0]!.raw).toBe(`${golden}"stream":true,"stream_options":{"include_usage":true}}`);
    });
  });

  describe('transcribe', () => {
    const audio = { data: Buffer.from('OggS fake voice bytes \u0000\u0001\u00ff', 'latin1'), name: 'voice.ogg', mime: 'audio/ogg' };

    it('sends the file and the model with the correlation header, and returns the text trimmed', async () => {
      fake.transcriptionScript.push({ text: '  turn on the lights \n' });
      const text = await provider().transcribe(audio, { model: 'whisper-1', correlationId: 'c-voice' });
      expect(text).toBe('turn on the lights');
      expect(fake.transcriptions).toHaveLength(1);
      const received = fake.transcriptions[0]!;
      expect(received.model).toBe('whisper-1');
      expect(received.file).toMatchObject({ name: 'voice.ogg', mime: 'audio/ogg', size: audio.data.length });
      expect(received.file.data.equals(audio.data)).toBe(true);
      expect(received.headers['x-correlation-id']).toBe('c-voice');
      expect(fake.requests).toHaveLength(0);
    });

    it('tries a 500 again and returns the next answer', async () => {
      fake.transcriptionScript.push({ status: 500, headers: { 'retry-after-ms': '10' } }, { text: 'second time' });
      expect(await provider(2).transcribe(audio, { model: 'whisper-1', correlationId: 'c-retry' })).toBe('second time');
      expect(fake.transcriptions).toHaveLength(2);
    });

    it('a 400 is a ProviderError that is not retried', async () => {
      fake.transcriptionScript.push({ status: 400, error: { message: 'unsupported audio' } });
      const failure = provider(2).transcribe(audio, { model: 'whisper-1' });
      await expect(failure).rejects.toMatchObject({ name: 'ProviderError', code: 'PROVIDER_FAILED', providerStatus: 400, retryable: false });
      await expect(failure).rejects.toThrow(/unsupported audio/);
      expect(fake.transcriptions).toHaveLength(1);
    });

    it('the caller signal aborts a transcription the server holds', async () => {
      let release = () => undefined as void;
      fake.transcriptionScript.push({ text: 'too late', until: new Promise<void>((resolve) => { release = resolve; }) });
      const turn = new AbortController();
      const pending = provider().transcribe(audio, { model: 'whisper-1', signal: turn.signal });
      await expect.poll(() => fake.transcriptions.length).toBe(1);
      turn.abort();
      await expect(pending).rejects.toMatchObject({ name: 'ProviderError', code: 'PROVIDER_ABORTED' });
      release();
    });

    it('a held transcription ends at the provider timeout', async () => {
      fake.transcriptionScript.push({ text: 'too late', until: new Promise<void>(() => undefined) });
      await expect(provider(0, 200).transcribe(audio, { model: 'whisper-1' })).rejects.toMatchObject({ name: 'ProviderError', code: 'PROVIDER_TIMEOUT', retryable: true });
    });

    it('the offline provider cannot transcribe', () => {
      const offline: Provider = new OfflineProvider({ id: 'off' });
      expect(offline.transcribe).toBeUndefined();
    });
  });
});

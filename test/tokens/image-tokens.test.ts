import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/providers/types.ts';
import { chatMessageTokens, countRequestTokens, countTokens, MESSAGE_OVERHEAD, NAME_OVERHEAD, REQUEST_OVERHEAD } from '../../src/tokens/tokens.ts';

// Issue 28: a message's images cost their own estimate (made upstream with the provider's tile rule).

describe('image tokens in request counting', () => {
  const text = 'what is in these pictures?';
  const plain: ChatMessage = { role: 'user', content: text };
  const withImages: ChatMessage = { role: 'user', content: text, images: [{ url: 'data:image/png;base64,AAAA', tokens: 85 }, { url: 'https://example.com/a.jpg', tokens: 765, width: 1024, height: 1024 }] };

  it('a message counts its text and every image\'s tokens', () => {
    expect(chatMessageTokens(plain, 'gpt-4o')).toBe(MESSAGE_OVERHEAD + countTokens(text, 'gpt-4o'));
    expect(chatMessageTokens(withImages, 'gpt-4o')).toBe(chatMessageTokens(plain, 'gpt-4o') + 85 + 765);
    const named: ChatMessage = { role: 'user', content: '', name: 'ann', images: [{ url: 'data:image/png;base64,AAAA', tokens: 170 }] };
    expect(chatMessageTokens(named, 'gpt-4o')).toBe(MESSAGE_OVERHEAD + NAME_OVERHEAD + countTokens('ann', 'gpt-4o') + 170);
  });

  it('no images and an empty list count the same as before', () => {
    expect(chatMessageTokens({ ...plain, images: [] }, 'gpt-4o')).toBe(chatMessageTokens(plain, 'gpt-4o'));
  });

  it('a whole request counts the images of its messages', () => {
    const messages: ChatMessage[] = [{ role: 'system', content: 'You see.' }, withImages, { role: 'assistant', content: 'two pictures' }];
    const withoutImages = messages.map(({ images: _drop, ...m }) => m);
    expect(countRequestTokens(messages, [], 'gpt-4o')).toBe(countRequestTokens(withoutImages, [], 'gpt-4o') + 850);
    expect(countRequestTokens(withoutImages, [], 'gpt-4o')).toBe(REQUEST_OVERHEAD + withoutImages.reduce((n, m) => n + chatMessageTokens(m, 'gpt-4o'), 0));
  });
});

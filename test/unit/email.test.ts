/**
 * The one rule for email addresses (src/store/rules.ts checkEmail), which every store applies to
 * every account it creates: the dashboard's sign-up and the CLI's `accounts create` both end there.
 */
import { describe, expect, it } from 'vitest';
import { StoreError } from '../../src/store/errors.js';
import { checkEmail } from '../../src/store/rules.js';

const refused = (email: string) => {
  try {
    checkEmail(email);
    return false;
  } catch (err) {
    return err instanceof StoreError && err.code === 'invalid_argument';
  }
};

describe('checkEmail', () => {
  it('accepts ordinary addresses, trimmed and in NFC', () => {
    for (const email of [
      'ada@example.com',
      'Ada.Lovelace+bgone@Mail.Example.CO.UK',
      'a_b-c%d!e#f$g&h*i/j=k?l^m{n|o}p~q@example.com',
      'local@localhost',
      'a@b.c',
      'user@xn--bcher-kva.example',
      'user@shop.xn--p1ai',
      'josé@example.com',
      "o'brien@example.com",
      'x@a-b.example',
      `${'l'.repeat(64)}@${'d'.repeat(63)}.${'e'.repeat(63)}.${'f'.repeat(61)}`, // 254 characters
    ])
      expect(refused(email), email).toBe(false);
    expect(checkEmail('  ada@example.com \n')).toBe('ada@example.com');
  });

  it('refuses HTML metacharacters, quotes, controls and spaces anywhere', () => {
    for (const email of [
      'x@ex<b>ample.com',
      '<script>@example.com',
      'x>y@example.com',
      '"quoted"@example.com',
      'x@example.com"',
      'a\u0000@example.com',
      'a@exam\u0007ple.com',
      'a\u007f@example.com',
      'a b@example.com',
      'a@exa mple.com',
      'a(comment)@example.com',
      'a,b@example.com',
      'a;b@example.com',
      'a:b@example.com',
      'a\\b@example.com',
      'a[b]@example.com',
      'a`b@example.com',
    ])
      expect(refused(email), JSON.stringify(email)).toBe(true);
  });

  it('refuses a malformed local part or domain', () => {
    for (const email of [
      '',
      '@example.com',
      'ada@',
      'ada',
      'a@b@example.com',
      '.ada@example.com',
      'ada.@example.com',
      'a..da@example.com',
      `${'l'.repeat(65)}@example.com`,
      'ada@example',
      'ada@example.',
      'ada@.example.com',
      'ada@example..com',
      'ada@-example.com',
      'ada@example-.com',
      'ada@exa_mple.com',
      'ada@example.c0m',
      'ada@example.123',
      'ada@127.0.0.1',
      'ada@[127.0.0.1]',
      'ada@bücher.example',
      `ada@${'d'.repeat(64)}.com`,
      `ada@${'d.'.repeat(126)}com`,
      `${'a'.repeat(64)}@${'d'.repeat(63)}.${'e'.repeat(63)}.${'f'.repeat(63)}.com`,
    ])
      expect(refused(email), JSON.stringify(email)).toBe(true);
  });
});

/**
 * The playground's image attachments in headless chromium against the real
 * server running the tiny LLaVA fixture: the Images control is enabled for the
 * image group, attaching the two fixture PNGs inserts `<image:name>` tags at
 * the cursor, and Generate streams (through /image_generate_stream, the tags
 * sent as data URLs) the golden greedy tokens of scripts/golden/make_llava.py.
 * Leaves a screenshot in test-results/web-playground-images.png.
 */
import { mkdir } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { launch, type Browser } from './harness.ts';
import { startWebService, type WebService } from './web_service.ts';

const DIR = fileURLToPath(new URL('../fixtures/decoders/llava_tiny', import.meta.url));
const golden = JSON.parse(readFileSync(`${DIR}/golden.json`, 'utf8')) as { greedy: number[]; images: string[] };

let web: WebService | undefined;
let browser: Browser | undefined;

beforeAll(async () => {
  await mkdir('test-results', { recursive: true });
  web = await startWebService({ model: DIR });
  browser = await launch();
  await browser.page.setViewportSize({ width: 1280, height: 900 });
}, 180_000);
afterAll(async () => {
  await browser?.close();
  await web?.close();
});

it('attaches images to the prompt and generates from them', async () => {
  const page = browser!.page;
  await page.goto(`${web!.page}#/playground`);
  await page.waitForSelector('#pg-target option[value="primary"]:not([disabled])', { state: 'attached' });
  await page.waitForSelector('#pg-images:not([disabled])');
  await page.fill('#pg-prompt', ' and : the cat');
  await page.fill('#pg-max', '8');
  await page.fill('#pg-temp', '0');
  // Cursor at 0, attach image_a; then after " and", attach image_b.
  await page.evaluate(() => (document.querySelector('#pg-prompt') as HTMLTextAreaElement).setSelectionRange(0, 0));
  await page.setInputFiles('#pg-images', `${DIR}/${golden.images[0]}`);
  await page.waitForFunction(() => (document.querySelector('#pg-prompt') as HTMLTextAreaElement).value.startsWith('<image:image_a.png>'));
  await page.evaluate(() => {
    const t = document.querySelector('#pg-prompt') as HTMLTextAreaElement;
    const at = t.value.indexOf(' and ') + 5;
    t.setSelectionRange(at, at);
  });
  await page.setInputFiles('#pg-images', `${DIR}/${golden.images[1]}`);
  await page.waitForFunction(() => (document.querySelector('#pg-prompt') as HTMLTextAreaElement).value.includes('<image:image_b.png>'));
  expect(await page.inputValue('#pg-prompt')).toBe('<image:image_a.png> and <image:image_b.png>: the cat');
  await page.click('#pg-generate');
  await page.waitForFunction(() => !['…', '—'].includes(document.querySelector('#pg-finish')?.textContent ?? ''), undefined, { timeout: 60_000 });
  expect(await page.textContent('#pg-form-error')).toBe('');
  expect(JSON.parse((await page.textContent('#pg-ids')) ?? '[]')).toEqual(golden.greedy);
  expect(await page.textContent('#pg-usage')).toContain('prompt 41');
  await page.waitForTimeout(300);
  await page.screenshot({ path: 'test-results/web-playground-images.png', fullPage: true });
  expect(browser!.log.filter((l) => l.startsWith('[pageerror]'))).toEqual([]);
}, 120_000);

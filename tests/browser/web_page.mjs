// The web page in headless Chromium against a running gateway, as a researcher uses it: type an
// abstract, generate, follow the citations to the references, copy, download the BibTeX; upload
// a PDF; upload a file that is not a PDF. Run by tests/browser/test_web_page.py; prints one JSON
// line of what it saw and exits non-zero, naming the step, when something is wrong.
//
//   node web_page.mjs --url http://127.0.0.1:PORT --abstract TEXT --pdf FILE --not-pdf FILE
//                     --screenshot OUT.png
import {chromium} from 'playwright-core';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {parseArgs} from 'node:util';

const {values: args} = parseArgs({options: {
  url: {type: 'string'},
  abstract: {type: 'string'},
  pdf: {type: 'string'},
  'not-pdf': {type: 'string'},
  screenshot: {type: 'string'},
  chromium: {type: 'string', default: '/usr/bin/chromium'},
  'timeout-ms': {type: 'string', default: '180000'},
}});
for (const name of ['url', 'abstract', 'pdf', 'not-pdf', 'screenshot']) {
  assert.ok(args[name], `--${name} is required`);
}
const TIMEOUT = Number(args['timeout-ms']);
const origin = new URL(args.url).origin;

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'citeweave-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: args.chromium,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: {width: 1100, height: 900},
  acceptDownloads: true,
});
const seen = {steps: [], offsite: [], consoleErrors: []};
let step = 'start';
let expectedErrors = 0;

try {
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], {origin});
  // The page may load nothing from anywhere else: every request off this origin fails the run.
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(origin) || url.startsWith('blob:') || url.startsWith('data:')) {
      return route.continue();
    }
    seen.offsite.push(url);
    return route.abort();
  });
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on('pageerror', (error) => seen.consoleErrors.push(`${step}: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    // Chromium logs every non-2xx fetch; the non-PDF step expects exactly one.
    if (expectedErrors > 0 && /status of 400/.test(message.text())) {
      expectedErrors -= 1;
      return;
    }
    seen.consoleErrors.push(`${step}: ${message.text()}`);
  });

  step = 'load the page';
  await page.goto(args.url);
  await page.waitForFunction(() => /\d/.test(document.getElementById('corpus-size').textContent));
  const controls = await page.evaluate(() => Object.fromEntries(
    ['breadth', 'depth', 'diversity'].map((id) => {
      const input = document.getElementById(id);
      return [id, {min: input.min, max: input.max, value: input.value,
        shown: document.getElementById(`${id}-value`).textContent}];
    })));
  assert.deepEqual(controls, {
    breadth: {min: '5', max: '20', value: '10', shown: '10'},
    depth: {min: '1', max: '5', value: '2', shown: '2'},
    diversity: {min: '0', max: '1', value: '0', shown: '0'},
  });
  assert.equal(await page.isHidden('#key-group'), true, 'no key field when keys are off');
  seen.steps.push(step);

  step = 'an empty abstract is named';
  await page.click('#generate');
  assert.equal(await page.textContent('#error'), 'Paste the abstract of your paper first.');
  seen.steps.push(step);

  step = 'generate from an abstract';
  await page.fill('#abstract', args.abstract);
  await page.focus('#breadth');
  for (let i = 0; i < 5; i += 1) await page.keyboard.press('ArrowLeft');
  assert.equal(await page.textContent('#breadth-value'), '5',
    'the breadth shown follows the slider');
  // What the progress bar and the streamed text did, recorded as it happens.
  await page.evaluate(() => {
    window.seen = {percents: [], messages: [], streamed: 0};
    const bar = document.getElementById('progress');
    new MutationObserver(() => {
      window.seen.percents.push(Number(bar.value));
      window.seen.messages.push(document.getElementById('progress-message').textContent);
    }).observe(bar, {attributes: true, attributeFilter: ['value']});
    new MutationObserver(() => {
      window.seen.streamed = Math.max(window.seen.streamed,
        document.getElementById('live-text').textContent.length);
    }).observe(document.getElementById('live-text'), {childList: true});
  });
  const started = Date.now();
  await page.click('#generate');
  await page.waitForSelector('#references li');
  const abstractRun = await page.evaluate(() => window.seen);
  abstractRun.seconds = (Date.now() - started) / 1000;
  assert.ok(abstractRun.percents.length >= 5, `the bar moved ${abstractRun.percents.length} times`);
  for (let i = 1; i < abstractRun.percents.length; i += 1) {
    assert.ok(abstractRun.percents[i] >= abstractRun.percents[i - 1],
      `progress went back: ${abstractRun.percents.join(', ')}`);
  }
  assert.equal(abstractRun.percents.at(-1), 100);
  assert.ok(abstractRun.messages.some((m) => /Fetching full texts/.test(m)),
    'stage messages shown');
  assert.ok(abstractRun.streamed > 0, 'the text appeared while it was written');
  assert.equal(await page.isVisible('#error'), false);
  seen.steps.push(step);

  step = 'every citation links to its reference';
  const citations = await page.evaluate(() => {
    const section = document.getElementById('section-text');
    const links = [...section.querySelectorAll('.citation a')].map((a) => a.getAttribute('href'));
    const unlinked = [...section.querySelectorAll('p')].flatMap((p) => {
      const copy = p.cloneNode(true);
      copy.querySelectorAll('.citation').forEach((c) => c.remove());
      return copy.textContent.match(/\[\d+(?:,\s*\d+)*\]/g) || [];
    });
    const references = [...document.querySelectorAll('#references li')].map((li) => ({
      id: li.id, text: li.textContent, href: li.querySelector('a') && li.querySelector('a').href,
    }));
    return {links, unlinked, references, text: section.textContent};
  });
  assert.ok(citations.links.length > 0, 'the section has citation links');
  assert.deepEqual(citations.unlinked, [], 'markers left without a link');
  const ids = new Set(citations.references.map((r) => `#${r.id}`));
  for (const href of citations.links) assert.ok(ids.has(href), `${href} has no reference`);
  assert.deepEqual(new Set(citations.links), ids, 'every reference is cited in the text');
  // arXiv papers link to arXiv; the fixture corpus's DOI-only papers have no URL.
  const arxivLinked = citations.references.filter((r) => /arXiv:/.test(r.text));
  assert.ok(arxivLinked.length > 0, 'arXiv papers are cited');
  for (const reference of arxivLinked) {
    assert.match(reference.href || '', /^https:\/\/arxiv\.org\/abs\//,
      `${reference.id} links to arXiv`);
  }
  await page.click('#section-text .citation a');
  const target = await page.evaluate(() => location.hash);
  assert.ok(ids.has(target), `clicking a citation goes to its reference (${target})`);
  seen.steps.push(step);

  step = 'copy';
  await page.click('#copy');
  await page.waitForFunction(() => document.getElementById('copy-status').textContent);
  assert.equal(await page.textContent('#copy-status'), 'Copied.');
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.ok(copied.startsWith(citations.text.slice(0, 40)), 'the copy starts with the section');
  assert.ok(copied.includes('\nReferences\n') && copied.includes('https://arxiv.org/abs/'));
  seen.steps.push(step);

  step = 'BibTeX download';
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#bibtex')]);
  assert.equal(download.suggestedFilename(), 'citeweave.bib');
  const bibtex = fs.readFileSync(await download.path(), 'utf8');
  const entries = bibtex.match(/^@\w+\{/gm) || [];
  assert.equal(entries.length, citations.references.length, 'one BibTeX entry per reference');
  seen.steps.push(step);

  step = 'screenshot';
  await page.evaluate(() => {
    document.getElementById('shortlist-details').open = true;
    location.hash = '';  // no reference highlighted as the clicked one
    window.scrollTo(0, 0);
  });
  fs.mkdirSync(path.dirname(args.screenshot), {recursive: true});
  await page.screenshot({path: args.screenshot, fullPage: true});
  seen.steps.push(step);

  step = 'author-year citations link too';
  await page.selectOption('#style', 'author-year');
  await page.click('#generate');
  await page.waitForSelector('#references-block', {state: 'hidden'});
  await page.waitForSelector('#references li');
  const authorYear = await page.evaluate(() => {
    const section = document.getElementById('section-text');
    const unlinked = [...section.querySelectorAll('p')].flatMap((p) => {
      const copy = p.cloneNode(true);
      copy.querySelectorAll('.citation').forEach((c) => c.remove());
      // "(Cohan et al., 2020; ...)" or "Cohan et al. (2020)" left as plain text.
      return copy.textContent.match(/\([^()]*\b(19|20)\d\d[a-z]?\)/g) || [];
    });
    const ids = new Set([...document.querySelectorAll('#references li')].map((li) => `#${li.id}`));
    const links = [...section.querySelectorAll('.citation a')].map((a) => a.getAttribute('href'));
    return {unlinked, links, ids: [...ids]};
  });
  assert.deepEqual(authorYear.unlinked, [], 'author-year markers left without a link');
  assert.deepEqual(new Set(authorYear.links), new Set(authorYear.ids));
  await page.selectOption('#style', 'numeric');
  seen.steps.push(step);

  step = 'generate from a PDF';
  await page.check('input[name="input-kind"][value="pdf"]');
  assert.equal(await page.isVisible('#abstract'), false);
  await page.setInputFiles('#pdf', args.pdf);
  await page.click('#generate');
  await page.waitForSelector('#references-block', {state: 'hidden'});
  await page.waitForSelector('#references li');
  const facts = await page.textContent('#run-facts');
  assert.match(facts, /Input\s*pdf/, 'the run read the PDF');
  const pdfLinks = await page.$$eval('#section-text .citation a', (links) => links.length);
  assert.ok(pdfLinks > 0, 'the PDF run has citations');
  seen.steps.push(step);

  step = 'a file that is not a PDF';
  await page.setInputFiles('#pdf', args['not-pdf']);
  expectedErrors = 1;
  await page.click('#generate');
  await page.waitForSelector('#error', {state: 'visible'});
  assert.equal(await page.textContent('#error'),
    'That file is not a PDF. Upload the PDF of your paper.');
  assert.equal(await page.isVisible('#output'), false, 'no stale result under the message');
  assert.equal(await page.isEnabled('#generate'), true, 'the form can be used again');
  seen.steps.push(step);

  assert.deepEqual(seen.offsite, [], 'requests off the page\'s origin');
  assert.deepEqual(seen.consoleErrors, [], 'errors in the page');
  console.log(JSON.stringify({ok: true, steps: seen.steps, abstractRun,
    references: citations.references.length, citationLinks: citations.links.length,
    authorYearLinks: authorYear.links.length,
    bibtexEntries: entries.length, pdfCitationLinks: pdfLinks}));
} catch (error) {
  console.error(`web page test failed at "${step}": ${error.message}`);
  console.error(JSON.stringify({steps: seen.steps, offsite: seen.offsite,
    consoleErrors: seen.consoleErrors}));
  process.exitCode = 1;
} finally {
  await context.close();
  fs.rmSync(userDataDir, {recursive: true, force: true});
}

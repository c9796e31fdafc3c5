// The citeweave page: one form, one streamed request, one result. No framework and no build
// step, so the gateway serves this file as it is and the page loads nothing from elsewhere.
'use strict';

const API = '/api/v1';
const KEY_STORAGE = 'citeweave.apiKey';
const MIB = 1024 * 1024;

const STAGE_LABELS = {
  STAGE_EMBEDDING: 'Reading your paper',
  STAGE_LONGLIST: 'Finding candidate papers',
  STAGE_FETCHING: 'Fetching full texts',
  STAGE_PAGES: 'Choosing pages to read',
  STAGE_SHORTLIST: 'Shortlisting papers',
  STAGE_SUMMARIZING: 'Summarizing papers',
  STAGE_WRITING: 'Writing the section',
  STAGE_DONE: 'Done',
};

// What a person lost when a service is down, by the name the gateway gives it.
const SERVICE_TASKS = {
  retriever: 'Search',
  embedder: 'Reading your text',
  fetcher: 'Fetching the papers',
  generator: 'Writing',
};

const $ = (id) => document.getElementById(id);

const state = {
  info: null,
  controller: null,
  result: null,
  lastStage: '',
};

// --- setup --------------------------------------------------------------------------------------

document.addEventListener('DOMContentLoaded', () => {
  for (const radio of document.querySelectorAll('input[name="input-kind"]')) {
    radio.addEventListener('change', showInputKind);
  }
  for (const id of ['breadth', 'depth', 'diversity']) {
    $(id).addEventListener('input', () => showValue(id));
  }
  $('abstract').addEventListener('input', countAbstract);
  $('api-key').value = sessionStorage.getItem(KEY_STORAGE) || '';
  $('request-form').addEventListener('submit', (event) => {
    event.preventDefault();
    generate();
  });
  $('stop').addEventListener('click', () => state.controller && state.controller.abort());
  $('copy').addEventListener('click', copyResult);
  $('bibtex').addEventListener('click', downloadBibtex);
  showInputKind();
  loadInfo();
});

async function loadInfo() {
  let info;
  try {
    const response = await fetch(`${API}/info`, {headers: {Accept: 'application/json'}});
    if (!response.ok) throw await errorOf(response);
    info = await response.json();
  } catch (error) {
    showError(describeError(error));
    return;
  }
  state.info = info;
  for (const name of ['breadth', 'depth', 'diversity']) {
    const range = info[name];
    if (!range || range.max <= range.min) continue;
    const input = $(name);
    input.min = range.min;
    input.max = range.max;
    input.value = range.default;
    showValue(name);
  }
  if (info.max_abstract_chars) $('abstract-max').textContent = info.max_abstract_chars;
  if (info.max_pdf_bytes) $('pdf-max-size').textContent = megabytes(info.max_pdf_bytes);
  if (info.max_pdf_pages) $('pdf-max-pages').textContent = info.max_pdf_pages;
  if (info.papers) {
    $('corpus-size').textContent =
      `the ${Number(info.papers).toLocaleString('en')} papers of this service's corpus`;
  }
  // One backend is no choice: the select appears only when there are several.
  if (info.backends && info.backends.length > 1) {
    const select = $('backend');
    select.replaceChildren(option('', `The service's default${
      info.default_backend ? ` (${info.default_backend})` : ''}`));
    for (const backend of info.backends) select.append(option(backend, backendLabel(backend)));
    $('backend-group').hidden = false;
  }
  $('key-group').hidden = !info.auth_required;
  countAbstract();
}

function option(value, label) {
  const element = document.createElement('option');
  element.value = value;
  element.textContent = label;
  return element;
}

function backendLabel(backend) {
  return {extractive: 'Extractive (sentences of the papers, no LLM)',
    openai: 'LLM (the service\'s language model)'}[backend] || backend;
}

function showInputKind() {
  const kind = document.querySelector('input[name="input-kind"]:checked').value;
  $('abstract-group').hidden = kind !== 'abstract';
  $('pdf-group').hidden = kind !== 'pdf';
}

function showValue(name) {
  $(`${name}-value`).textContent = $(name).value;
}

function countAbstract() {
  $('abstract-count').textContent = $('abstract').value.length;
}

function megabytes(bytes) {
  if (bytes < MIB) return `${Math.ceil(bytes / 1024)} KB`;
  return `${Number((bytes / MIB).toFixed(1))} MB`;
}

// --- the request --------------------------------------------------------------------------------

// The form's content, or a sentence saying what is missing.
function buildForm() {
  const form = new FormData();
  const kind = document.querySelector('input[name="input-kind"]:checked').value;
  const info = state.info || {};
  if (kind === 'pdf') {
    const file = $('pdf').files[0];
    if (!file) return 'Choose the PDF of your paper first.';
    if (info.max_pdf_bytes && file.size > info.max_pdf_bytes) {
      return `That PDF is ${megabytes(file.size)}; this service accepts PDFs of up to ` +
        `${megabytes(info.max_pdf_bytes)}.`;
    }
    form.append('pdf', file, file.name);
  } else {
    const abstract = $('abstract').value.trim();
    if (!abstract) return 'Paste the abstract of your paper first.';
    if (info.max_abstract_chars && abstract.length > info.max_abstract_chars) {
      return `The abstract is ${abstract.length} characters; this service accepts up to ` +
        `${info.max_abstract_chars}. Shorten it, or upload the PDF instead.`;
    }
    form.append('abstract', abstract);
  }
  form.append('breadth', $('breadth').value);
  form.append('depth', $('depth').value);
  form.append('diversity', $('diversity').value);
  form.append('style', $('style').value);
  if (!$('backend-group').hidden && $('backend').value) form.append('backend', $('backend').value);
  return form;
}

async function generate() {
  const form = buildForm();
  if (typeof form === 'string') {
    showError(form);
    return;
  }
  const headers = {Accept: 'text/event-stream'};
  const key = $('api-key').value.trim();
  if (key) {
    headers['X-API-Key'] = key;
    sessionStorage.setItem(KEY_STORAGE, key);
  }
  startRun();
  const controller = new AbortController();
  state.controller = controller;
  try {
    const response = await fetch(`${API}/generate`, {
      method: 'POST', body: form, headers, signal: controller.signal,
    });
    if (!response.ok) throw await errorOf(response);
    let finished = false;
    for await (const {event, data} of serverSentEvents(response)) {
      if (event === 'progress') showProgress(data);
      else if (event === 'delta') appendText(data.text);
      else if (event === 'reset') resetText(data.reason);
      else if (event === 'result') {
        showResult(data);
        finished = true;
      } else if (event === 'error') throw apiError(data.error, response.status);
    }
    if (!finished) {
      throw new Error('The connection was interrupted before the section was finished. ' +
        'Try again.');
    }
  } catch (error) {
    if (controller.signal.aborted) {
      $('progress-message').textContent = 'Stopped.';
      $('stage-announcer').textContent = 'Stopped.';
    } else {
      showError(describeError(error));
      $('progress-section').hidden = true;
    }
  } finally {
    state.controller = null;
    $('generate').disabled = false;
    $('stop').hidden = true;
    $('output').removeAttribute('aria-busy');
  }
}

function startRun() {
  hideError();
  state.result = null;
  state.lastStage = '';
  $('generate').disabled = true;
  $('stop').hidden = false;
  $('progress-section').hidden = false;
  $('progress').value = 0;
  $('progress-message').textContent = 'Starting…';
  $('stage-announcer').textContent = 'Started.';
  $('output').hidden = true;
  $('output').setAttribute('aria-busy', 'true');
  $('live-text').replaceChildren();
  $('live-text').hidden = false;
  $('section-text').hidden = true;
  $('notices').replaceChildren();
  for (const id of ['result-actions', 'references-block', 'shortlist-details', 'run-details']) {
    $(id).hidden = true;
  }
  $('copy-status').textContent = '';
}

// Server-sent events from a fetch() body: EventSource cannot POST a form.
async function* serverSentEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  const separator = /\r?\n\r?\n/;
  let buffer = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += value;
    let match;
    while ((match = separator.exec(buffer)) !== null) {
      const block = buffer.slice(0, match.index);
      buffer = buffer.slice(match.index + match[0].length);
      let event = 'message';
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith(':')) continue; // a keep-alive comment
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const content = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = content;
        else if (field === 'data') data.push(content);
      }
      if (data.length) yield {event, data: JSON.parse(data.join('\n'))};
    }
  }
}

// --- progress and streamed text -----------------------------------------------------------------

function showProgress(progress) {
  const label = STAGE_LABELS[progress.stage] || 'Working';
  $('progress').value = progress.percent;
  // Per-paper messages ("0704.0002: abstract only (...)") are detail for the log and the
  // warnings; the bar says how far along the stage is.
  let line = label;
  if (progress.stage === 'STAGE_DONE') line = 'Done';
  else if (progress.total > 1) line += `: ${progress.done} of ${progress.total}`;
  else if (progress.message) line += `: ${progress.message}`;
  $('progress-message').textContent = `${line} (${progress.percent}%)`;
  // Screen readers hear each stage once, not every percent.
  if (progress.stage !== state.lastStage) {
    state.lastStage = progress.stage;
    $('stage-announcer').textContent = `${label}.`;
  }
}

function appendText(text) {
  $('output').hidden = false;
  $('live-text').append(document.createTextNode(text));
}

function resetText(reason) {
  $('live-text').replaceChildren();
  addNotice('note', `The writer started over${reason ? `: ${reason}` : ''}.`);
}

// --- the result ---------------------------------------------------------------------------------

function showResult(result) {
  state.result = result;
  $('progress').value = 100;
  $('progress-message').textContent = 'Done.';
  $('stage-announcer').textContent = 'Done. The section is below.';
  $('output').hidden = false;
  $('live-text').hidden = true;
  $('live-text').replaceChildren();

  if (result.generation_error) {
    const down = /\bthe generator\b.*?\bunavailable\b/i.test(result.generation_error);
    addNotice('error', down
      ? 'Writing is unavailable right now (the generator is down), so there is no section. ' +
        'The papers found are listed below; try again in a few minutes for the text.'
      : 'The section could not be written. The papers found are listed below.',
    result.generation_error);
  }
  // The gateway lists an LLM fallback among the warnings already.
  for (const warning of result.warnings || []) addNotice('warning', sentence(warning));

  const references = result.references || [];
  const text = $('section-text');
  text.replaceChildren(...paragraphs(result.text || '', references));
  text.hidden = !result.text;

  const list = $('references');
  list.replaceChildren(...references.map(referenceItem));
  $('references-block').hidden = references.length === 0;
  $('result-actions').hidden = !result.text;
  $('bibtex').disabled = !result.bibtex;

  showShortlist(result.shortlist || []);
  // Without a section the shortlist is the result.
  $('shortlist-details').open = !result.text;
  showRunFacts(result);
}

function referenceId(index) {
  return `ref-${index + 1}`;
}

function referenceItem(reference, index) {
  const item = document.createElement('li');
  item.id = referenceId(index);
  if (isNumeric(reference.marker)) {
    const marker = document.createElement('span');
    marker.className = 'marker';
    marker.textContent = `${reference.marker} `;
    item.append(marker);
  }
  // The formatted entry usually ends with its URL: that becomes the link, else one is added.
  const formatted = reference.formatted || '';
  const at = reference.url ? formatted.lastIndexOf(reference.url) : -1;
  if (at >= 0) {
    item.append(formatted.slice(0, at), externalLink(reference.url),
      formatted.slice(at + reference.url.length));
  } else {
    item.append(formatted);
    if (reference.url) item.append(' ', externalLink(reference.url));
  }
  return item;
}

function externalLink(url, text = url) {
  const link = document.createElement('a');
  link.href = url;
  link.textContent = text;
  link.rel = 'noopener noreferrer';
  link.target = '_blank';
  return link;
}

function isNumeric(marker) {
  return /^\[\d+\]$/.test(marker);
}

// The section as paragraphs whose citation markers link to their reference entries.
function paragraphs(text, references) {
  return text.split(/\n{2,}/).filter((p) => p.trim()).map((paragraph) => {
    const element = document.createElement('p');
    element.append(...linkCitations(paragraph, references));
    return element;
  });
}

// Markers as the generator writes them: "[1, 3]" and "Smith et al. [3]" in numeric style,
// "(Smith et al., 2020; Doe and Roe, 2021a)" and "Smith et al. (2020)" in author-year style.
// A group is linked only when every one of its parts names a reference, so that brackets or
// parentheses of the prose stay text.
function linkCitations(text, references) {
  const byNumber = new Map();
  const byEntry = new Map();
  const narratives = [];
  references.forEach((reference, index) => {
    if (isNumeric(reference.marker)) {
      byNumber.set(reference.marker.slice(1, -1), index);
      return;
    }
    const entry = reference.marker.replace(/^\(|\)$/g, '');
    byEntry.set(entry, index);
    const comma = entry.lastIndexOf(', ');
    if (comma > 0) {
      narratives.push({text: `${entry.slice(0, comma)} (${entry.slice(comma + 2)})`, index});
    }
  });

  const spans = [];  // {start, end, parts: [{text, index}], open, close, separator}
  for (const match of text.matchAll(/\[(\d+(?:,\s*\d+)*)\]/g)) {
    const numbers = match[1].split(/,\s*/);
    if (numbers.every((n) => byNumber.has(n))) {
      spans.push({start: match.index, end: match.index + match[0].length, open: '[', close: ']',
        separator: ', ', parts: numbers.map((n) => ({text: n, index: byNumber.get(n)}))});
    }
  }
  for (const match of text.matchAll(/\(([^()]+)\)/g)) {
    const entries = match[1].split(/;\s*/);
    if (entries.every((e) => byEntry.has(e))) {
      spans.push({start: match.index, end: match.index + match[0].length, open: '(', close: ')',
        separator: '; ', parts: entries.map((e) => ({text: e, index: byEntry.get(e)}))});
    }
  }
  for (const narrative of narratives) {
    for (let at = text.indexOf(narrative.text); at >= 0;
      at = text.indexOf(narrative.text, at + 1)) {
      spans.push({start: at, end: at + narrative.text.length, open: '', close: '', separator: '',
        parts: [{text: narrative.text, index: narrative.index}]});
    }
  }
  spans.sort((a, b) => a.start - b.start || b.end - a.end);

  const nodes = [];
  let position = 0;
  for (const span of spans) {
    if (span.start < position) continue;  // inside a span already linked
    nodes.push(document.createTextNode(text.slice(position, span.start)));
    const cite = document.createElement('span');
    cite.className = 'citation';
    cite.append(span.open);
    span.parts.forEach((part, i) => {
      if (i) cite.append(span.separator);
      const link = document.createElement('a');
      link.href = `#${referenceId(part.index)}`;
      link.textContent = part.text;
      link.title = references[part.index].formatted;
      cite.append(link);
    });
    cite.append(span.close);
    nodes.push(cite);
    position = span.end;
  }
  nodes.push(document.createTextNode(text.slice(position)));
  return nodes;
}

// A notice, with the service's own words under "Details" when they are too technical to lead.
function addNotice(kind, message, details = '') {
  const notice = document.createElement('div');
  notice.className = `notice ${kind}`;
  notice.append(message);
  if (details) {
    const more = document.createElement('details');
    const summary = document.createElement('summary');
    summary.textContent = 'Details';
    more.append(summary, details);
    notice.append(more);
  }
  $('notices').append(notice);
}

function showShortlist(shortlist) {
  const body = $('shortlist').tBodies[0];
  body.replaceChildren(...shortlist.map((ranked) => {
    const row = document.createElement('tr');
    const paper = ranked.paper || {};
    const title = document.createElement('td');
    if (paper.url) {
      title.append(externalLink(paper.url, paper.title || paper.id));
    } else {
      title.textContent = paper.title || paper.id;
    }
    const pages = document.createElement('td');
    if (ranked.abstract_only) {
      pages.textContent = 'abstract only' +
        (ranked.fallback_reason ? `: ${ranked.fallback_reason}` : '');
    } else {
      pages.textContent = (ranked.chosen_pages || [])
        .map((page) => `p. ${page.number} (${page.similarity.toFixed(2)})`).join(', ') || '-';
    }
    row.append(cell(ranked.rank), title, cell(ranked.score.toFixed(3)), pages);
    return row;
  }));
  $('shortlist-summary').textContent =
    `Shortlist: the ${shortlist.length} papers read, with their scores and the pages chosen`;
  $('shortlist-details').hidden = shortlist.length === 0;
}

function cell(text) {
  const element = document.createElement('td');
  element.textContent = text;
  return element;
}

function showRunFacts(result) {
  const facts = [];
  const report = result.report || {};
  if (result.input_kind) {
    facts.push(['Input',
      result.input_kind + (result.input_title ? `: ${result.input_title}` : '')]);
  }
  if (report.backend) facts.push(['Writer', report.backend]);
  if (report.papers_shortlisted) {
    facts.push(['Papers cited',
      `${report.papers_cited} of ${report.papers_shortlisted} shortlisted`]);
  }
  if (report.citations_removed) {
    facts.push(['Citations removed', `${report.citations_removed} (not on the shortlist)`]);
  }
  if (report.note) facts.push(['Note', report.note]);
  facts.push(['Longlist', `${(result.longlist || []).length} papers considered`]);
  const timings = (result.timings || [])
    .map((t) => `${(STAGE_LABELS[t.stage] || t.stage).toLowerCase()} ` +
      `${(t.duration_ms / 1000).toFixed(1)} s`);
  if (timings.length) facts.push(['Time', timings.join(', ')]);
  $('run-facts').replaceChildren(...facts.flatMap(([term, value]) => {
    const dt = document.createElement('dt');
    dt.textContent = term;
    const dd = document.createElement('dd');
    dd.textContent = value;
    return [dt, dd];
  }));
  $('run-details').hidden = false;
}

// --- copy and BibTeX ----------------------------------------------------------------------------

function plainText(result) {
  const references = (result.references || []).map((r) =>
    (isNumeric(r.marker) ? `${r.marker} ` : '') + r.formatted +
    (r.url && !r.formatted.includes(r.url) ? ` ${r.url}` : ''));
  return `${result.text}\n\nReferences\n\n${references.join('\n')}\n`;
}

async function copyResult() {
  const text = plainText(state.result);
  try {
    // The Clipboard API exists only on https:// and localhost pages.
    if (!navigator.clipboard) throw new Error('no clipboard API');
    await navigator.clipboard.writeText(text);
  } catch {
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.className = 'offscreen';
    document.body.append(area);
    area.select();
    const copied = document.execCommand('copy');
    area.remove();
    if (!copied) {
      $('copy-status').textContent = 'Copying is blocked by this browser: select the text instead.';
      return;
    }
  }
  $('copy-status').textContent = 'Copied.';
}

function downloadBibtex() {
  const blob = new Blob([state.result.bibtex], {type: 'application/x-bibtex'});
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = 'citeweave.bib';
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// --- errors -------------------------------------------------------------------------------------

// What a status means when the body is not the API's (a proxy in between answered).
const CODE_OF_STATUS = {400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 413: 'PAYLOAD_TOO_LARGE',
  429: 'RESOURCE_EXHAUSTED', 502: 'UNAVAILABLE', 503: 'UNAVAILABLE', 504: 'DEADLINE_EXCEEDED'};

// The API's error body as an Error carrying its code.
function apiError(error, status) {
  const result = new Error((error && error.message) || '');
  result.code = (error && error.code) || CODE_OF_STATUS[status] ||
    (status >= 500 ? 'INTERNAL' : '');
  result.retryAfter = error && error.retry_after_s;
  result.status = status;
  return result;
}

async function errorOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not the API's JSON (a proxy's page): the status is all there is.
  }
  const error = apiError(body && body.error, response.status);
  if (!error.retryAfter && response.headers.get('Retry-After')) {
    error.retryAfter = Number(response.headers.get('Retry-After'));
  }
  return error;
}

function sentence(text) {
  const trimmed = text.trim();
  const capital = trimmed.charAt(0).toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

// An error in words a researcher can act on; never a stack trace or a bare status.
function describeError(error) {
  if (error instanceof TypeError && !error.code) {
    return 'The service cannot be reached. Check your connection, or try again in a minute.';
  }
  const message = error.message || '';
  switch (error.code) {
    case 'INVALID_ARGUMENT':
    case 'FAILED_PRECONDITION':
      if (/not a pdf|%pdf/i.test(message)) {
        return 'That file is not a PDF. Upload the PDF of your paper.';
      }
      return message ? sentence(message)
        : 'The service did not accept this request. Check the form and try again.';
    case 'PAYLOAD_TOO_LARGE': {
      const limit = state.info && state.info.max_pdf_bytes;
      return limit
        ? `That file is too large: this service accepts PDFs of up to ${megabytes(limit)}.`
        : sentence(message);
    }
    case 'UNAUTHENTICATED':
      $('key-group').hidden = false;
      $('api-key').focus();
      return $('api-key').value.trim()
        ? 'The API key was not accepted. Check it, or ask the people who run this service.'
        : 'This service needs an API key. Enter the key you were given above.';
    case 'RESOURCE_EXHAUSTED':
      return error.retryAfter
        ? `The service is busy: try again in ${Math.ceil(error.retryAfter)} s.`
        : 'The service is busy: try again in a moment.';
    case 'UNAVAILABLE': {
      // The gateway names the service first: "the retriever (host:port) is unavailable: ...".
      const named = /\b(embedder|retriever|fetcher|generator)\b/i.exec(message);
      if (named) {
        const service = named[1].toLowerCase();
        return `${SERVICE_TASKS[service]} is unavailable right now (the ${service} is down). ` +
          'Try again in a few minutes.';
      }
      return 'The service is unavailable right now. Try again in a few minutes.';
    }
    case 'DEADLINE_EXCEEDED':
      return 'This took too long and was stopped. Try a smaller breadth or depth, or try ' +
        'again later.';
    case 'INTERNAL':
    case 'UNKNOWN':
      return 'Something went wrong on the server. Try again; if it keeps happening, tell the ' +
        'people who run this service.';
    default:
      return message ? sentence(message) : 'The request failed. Try again in a minute.';
  }
}

function showError(message) {
  const element = $('error');
  element.textContent = message;
  element.hidden = false;
}

function hideError() {
  $('error').hidden = true;
  $('error').textContent = '';
}

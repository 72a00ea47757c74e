/*
 * stream: a bars CSV through trained bundles with foxhunt's C ABI, one decision per bar, as
 * `foxhunt predict --json` computes them (the same numbers, printed with 17 significant digits).
 *
 *   cc -std=c99 -Wall -Wextra -Werror -pedantic stream.c $(pkg-config --cflags --libs foxhunt)
 *   ./a.out BUNDLE_DIR BARS_CSV [RULE_JSON]
 *
 * BARS_CSV: a header naming timestamp (Unix seconds) and close, optionally open, high, low,
 * volume (open/high/low default to close, volume to 0) and symbol. Without a symbol column it is
 * one series (a FOXHUNT_DESK_SERIES desk, bar by bar); with one it is a panel (a
 * FOXHUNT_DESK_PANEL desk): the bars are fed one timestamp at a time, each timestamp's bars in
 * one call in the byte order of their symbols, as predict feeds a panel.
 * Output: "timestamp,symbol,decision,position,<model>..." then one line per bar ("-" for the
 * symbol of a series, "null" for a model still warming up).
 * Exit status: 0, or the foxhunt_status of the failed call (2 bad input, 1 failed, 3 out of
 * memory) with the library's message on stderr.
 */
#include <foxhunt/foxhunt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { COL_TIMESTAMP, COL_OPEN, COL_HIGH, COL_LOW, COL_CLOSE, COL_VOLUME, COL_SYMBOL, NCOLS };
static const char* const kColumns[NCOLS] = {"timestamp", "open",   "high",  "low",
                                            "close",     "volume", "symbol"};

/* The bars read, growing as the file is read. */
typedef struct bars {
  foxhunt_bar* v;
  size_t n, cap;
} bars;

static void die(int code, const char* what, const char* detail) {
  fprintf(stderr, "stream: %s%s\n", what, detail);
  exit(code);
}

static void* grow(void* p, size_t bytes) {
  void* q = realloc(p, bytes);
  if (q == NULL) die(3, "out of memory", "");
  return q;
}

/* One line without its end (\n or \r\n), or NULL at the end of the file. Freed by the caller. */
static char* read_line(FILE* f) {
  size_t n = 0, cap = 128;
  char* s = (char*)grow(NULL, cap);
  int c;
  while ((c = fgetc(f)) != EOF && c != '\n') {
    if (n + 2 > cap) s = (char*)grow(s, cap *= 2);
    s[n++] = (char)c;
  }
  if (c == EOF && n == 0) {
    free(s);
    return NULL;
  }
  if (n > 0 && s[n - 1] == '\r') --n;
  s[n] = '\0';
  return s;
}

/* Splits `line` at commas in place; returns the number of fields (at most `max`). */
static size_t split(char* line, char** fields, size_t max) {
  size_t n = 0;
  char* p = line;
  while (n < max) {
    fields[n++] = p;
    p = strchr(p, ',');
    if (p == NULL) break;
    *p++ = '\0';
  }
  return n;
}

static char* copy(const char* s) {
  char* d = (char*)grow(NULL, strlen(s) + 1);
  strcpy(d, s);
  return d;
}

static double number(const char* text, int line) {
  char* end = NULL;
  double v = strtod(text, &end);
  if (end == text || *end != '\0') {
    fprintf(stderr, "stream: line %d: expected a number, got '%s'\n", line, text);
    exit(2);
  }
  return v;
}

static int64_t seconds(const char* text, int line) {
  char* end = NULL;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0') {
    fprintf(stderr, "stream: line %d: expected Unix seconds, got '%s'\n", line, text);
    exit(2);
  }
  return (int64_t)v;
}

/* Reads every bar; *has_symbol says whether the file is a panel. */
static bars read_csv(const char* path, int* has_symbol) {
  enum { MAX_FIELDS = 64 };
  char* fields[MAX_FIELDS];
  int col[NCOLS];
  bars b = {NULL, 0, 0};
  size_t i, k, n;
  int line_no = 1;
  char* line;
  FILE* f = fopen(path, "r");
  if (f == NULL) die(2, "cannot open the bars CSV ", path);
  line = read_line(f);
  if (line == NULL) die(2, "empty bars CSV ", path);
  for (k = 0; k < NCOLS; ++k) col[k] = -1;
  n = split(line, fields, MAX_FIELDS);
  for (i = 0; i < n; ++i)
    for (k = 0; k < NCOLS; ++k)
      if (strcmp(fields[i], kColumns[k]) == 0) col[k] = (int)i;
  free(line);
  if (col[COL_TIMESTAMP] < 0 || col[COL_CLOSE] < 0)
    die(2, "expected a header with timestamp and close columns in ", path);
  *has_symbol = col[COL_SYMBOL] >= 0;
  while ((line = read_line(f)) != NULL) {
    foxhunt_bar* bar;
    ++line_no;
    if (line[0] == '\0') {
      free(line);
      continue;
    }
    n = split(line, fields, MAX_FIELDS);
    for (k = 0; k < NCOLS; ++k)
      if (col[k] >= (int)n) {
        fprintf(stderr, "stream: %s:%d: expected a %s column, got %zu fields\n", path, line_no,
                kColumns[k], n);
        exit(2);
      }
    if (b.n == b.cap) {
      b.cap = b.cap ? 2 * b.cap : 1024;
      b.v = (foxhunt_bar*)grow(b.v, b.cap * sizeof *b.v);
    }
    bar = &b.v[b.n++];
    bar->timestamp = seconds(fields[col[COL_TIMESTAMP]], line_no);
    bar->close = number(fields[col[COL_CLOSE]], line_no);
    bar->open = col[COL_OPEN] >= 0 ? number(fields[col[COL_OPEN]], line_no) : bar->close;
    bar->high = col[COL_HIGH] >= 0 ? number(fields[col[COL_HIGH]], line_no) : bar->close;
    bar->low = col[COL_LOW] >= 0 ? number(fields[col[COL_LOW]], line_no) : bar->close;
    bar->volume = col[COL_VOLUME] >= 0 ? number(fields[col[COL_VOLUME]], line_no) : 0.0;
    bar->symbol = *has_symbol ? copy(fields[col[COL_SYMBOL]]) : NULL;
    free(line);
  }
  fclose(f);
  return b;
}

/* Panel order: by timestamp, then by the symbol's bytes (strcmp compares unsigned chars). */
static int by_time_then_symbol(const void* a, const void* b) {
  const foxhunt_bar* x = (const foxhunt_bar*)a;
  const foxhunt_bar* y = (const foxhunt_bar*)b;
  if (x->timestamp != y->timestamp) return x->timestamp < y->timestamp ? -1 : 1;
  return strcmp(x->symbol, y->symbol);
}

static void check(foxhunt_status status) {
  if (status == FOXHUNT_OK) return;
  fprintf(stderr, "stream: %s (%s)\n", foxhunt_last_error(), foxhunt_status_name(status));
  exit((int)status);
}

static void print_double(double v) {
  if (isnan(v))
    printf(",null");
  else
    printf(",%.17g", v);
}

static void print_decision(foxhunt_desk* desk, const char* symbol, double* signals, size_t models) {
  foxhunt_decision d;
  size_t count = 0, m;
  check(foxhunt_desk_decision(desk, symbol, &d));
  check(foxhunt_desk_signals(desk, symbol, signals, models, &count));
  printf("%lld,%s", (long long)d.timestamp, symbol ? symbol : "-");
  print_double(d.decision);
  print_double(d.position);
  for (m = 0; m < count; ++m) print_double(signals[m]);
  printf("\n");
}

int main(int argc, char** argv) {
  foxhunt_desk_options options;
  foxhunt_desk* desk = NULL;
  bars b;
  int panel = 0;
  size_t models = 0, i, j, m;
  double* signals;

  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s BUNDLE_DIR BARS_CSV [RULE_JSON]\n", argv[0]);
    return 2;
  }
  check(FOXHUNT_CHECK_ABI());
  foxhunt_desk_options_init(&options);
  if (argc == 4) options.rule_file = argv[3];
  b = read_csv(argv[2], &panel);
  options.mode = panel ? FOXHUNT_DESK_PANEL : FOXHUNT_DESK_SERIES;
  check(foxhunt_desk_open(argv[1], &options, &desk));

  check(foxhunt_desk_model_count(desk, &models));
  signals = (double*)grow(NULL, (models ? models : 1) * sizeof *signals);
  printf("timestamp,symbol,decision,position");
  for (m = 0; m < models; ++m) {
    const char* name = NULL;
    check(foxhunt_desk_model_name(desk, m, &name));
    printf(",%s", name);
  }
  printf("\n");

  if (!panel) {
    for (i = 0; i < b.n; ++i) {
      check(foxhunt_desk_push_bar(desk, &b.v[i]));
      print_decision(desk, NULL, signals, models);
    }
  } else {
    qsort(b.v, b.n, sizeof *b.v, by_time_then_symbol);
    for (i = 0; i < b.n; i = j) {
      for (j = i; j < b.n && b.v[j].timestamp == b.v[i].timestamp;) ++j;
      check(foxhunt_desk_push_bars(desk, &b.v[i], j - i));
      for (m = i; m < j; ++m) print_decision(desk, b.v[m].symbol, signals, models);
    }
  }

  foxhunt_desk_close(desk);
  for (i = 0; i < b.n; ++i) free((char*)b.v[i].symbol);
  free(b.v);
  free(signals);
  return 0;
}

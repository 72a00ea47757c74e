/*
 * foxhunt.h: the C ABI of foxhunt (libfoxhunt_c.so), for engines written in C, Rust, Go, Java, C#
 * or anything else that can call C. C99 and C++; no C++ type and no exception crosses it.
 *
 *   #include <foxhunt/foxhunt.h>
 *   cc app.c $(pkg-config --cflags --libs foxhunt)
 *
 * Errors. Every call that can fail returns a foxhunt_status: FOXHUNT_OK (0), or the class of the
 * failure, the classes of the CLI's exit codes: FOXHUNT_ERR_INPUT (2, bad input: a missing
 * bundle directory, a bar with a NaN price, a malformed request), FOXHUNT_ERR_FAILED (1, a check
 * that did not hold on valid input, I/O, anything else), FOXHUNT_ERR_OOM (3, an allocation
 * refused under an enforced memory cap, or the device is full). foxhunt_last_error() then says
 * what was expected, what was received and where ("[component] message").
 *
 * Ownership. A handle from foxhunt_desk_open is released with foxhunt_desk_close, once. A string
 * a call writes to a `char** out` is the caller's: free it with foxhunt_free_string. Every
 * `const char*` the library returns (foxhunt_version, foxhunt_last_error, foxhunt_status_name,
 * foxhunt_desk_model_name) is the library's: never free it (lifetimes below). The library keeps
 * no pointer the caller passed in: strings and bars are copied during the call.
 *
 * Threads. A desk is used by one thread at a time (calls on one handle must not overlap); different
 * desks may be used in parallel from different threads. The last error is per thread. The plan
 * and budget calls cap the process's memory accounting while they measure: run them while no
 * desk of the same process is serving bars.
 *
 * ABI. FOXHUNT_ABI_VERSION changes whenever a declaration below changes incompatibly; call
 * FOXHUNT_CHECK_ABI() once at start-up to refuse a library built for another header. Option
 * structs carry their own size, so that fields added at their end stay compatible.
 */
#ifndef FOXHUNT_FOXHUNT_H
#define FOXHUNT_FOXHUNT_H

#include <stddef.h>
#include <stdint.h>

/** The ABI this header describes (compare with foxhunt_abi_version()). */
#define FOXHUNT_ABI_VERSION 1

#if defined(__GNUC__) || defined(__clang__)
#define FOXHUNT_API __attribute__((visibility("default")))
#else
#define FOXHUNT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** What a call did: FOXHUNT_OK, or the class of its failure (message: foxhunt_last_error()). */
typedef enum foxhunt_status {
  FOXHUNT_OK = 0,         /**< success */
  FOXHUNT_ERR_FAILED = 1, /**< a check that failed on valid input, I/O, any other failure */
  FOXHUNT_ERR_INPUT = 2,  /**< bad input or usage (the CLI's exit code 2) */
  FOXHUNT_ERR_OOM = 3     /**< an allocation refused under a memory cap, or the device is full */
} foxhunt_status;

/* ---- version and errors ---------------------------------------------------------------------- */

/** The library's version ("0.1.0"); a static string. */
FOXHUNT_API const char* foxhunt_version(void);
/** The ABI the library was built with (FOXHUNT_ABI_VERSION of its header). */
FOXHUNT_API int32_t foxhunt_abi_version(void);
/** FOXHUNT_OK when `header_abi_version` is the library's ABI, else FOXHUNT_ERR_INPUT with both
 *  versions in foxhunt_last_error(). Use FOXHUNT_CHECK_ABI(). */
FOXHUNT_API foxhunt_status foxhunt_check_abi(int32_t header_abi_version);
/** Checks that the loaded library implements this header's ABI. */
#define FOXHUNT_CHECK_ABI() foxhunt_check_abi(FOXHUNT_ABI_VERSION)

/** The message of this thread's last failed call ("" after a call that succeeded). Owned by the
 *  library, valid until this thread's next foxhunt call. */
FOXHUNT_API const char* foxhunt_last_error(void);
/** "ok", "failed", "input" or "out of memory" for a foxhunt_status ("unknown" for another
 *  value); a static string. */
FOXHUNT_API const char* foxhunt_status_name(int32_t status);

/* ---- the desk: the serving runtime ----------------------------------------------------------- */

/** An open serving runtime: the ensemble's models over one instrument or many (opaque). */
typedef struct foxhunt_desk foxhunt_desk;

/** What a desk serves. */
typedef enum foxhunt_desk_mode {
  /** One instrument, one bar per timestamp: each model's own stream, as `foxhunt predict` runs a
   *  bars CSV without a symbol column (the C++ serving::Ensemble). Bars' symbols are ignored. */
  FOXHUNT_DESK_SERIES = 0,
  /** Many instruments, the bars of one timestamp batched across instruments, as `foxhunt
   *  predict` runs a panel CSV (the C++ serving::Desk). Every bar names its symbol. */
  FOXHUNT_DESK_PANEL = 1
} foxhunt_desk_mode;

/** How to open a desk. Fill with foxhunt_desk_options_init, then set what differs. */
typedef struct foxhunt_desk_options {
  /** sizeof(foxhunt_desk_options) of the caller's header (set by foxhunt_desk_options_init): the
   *  library reads only the fields that fit in it. */
  size_t size;
  /** "cpu" (NULL: the same), "cuda" or "cuda:N". */
  const char* device;
  /** Decision rule JSON file; NULL: DIR/rule.json when `foxhunt train all` wrote one, else the
   *  built-in rule (as predict --rule). */
  const char* rule_file;
  /** FOXHUNT_DESK_SERIES with bundles trained on a panel: the instrument served (its normaliser
   *  and id; predict --symbol). NULL otherwise. */
  const char* symbol;
  /** A foxhunt_desk_mode (default FOXHUNT_DESK_SERIES). */
  int32_t mode;
  /** LibTorch's intra-op threads, set for the process at open; 0 (default) keeps the current
   *  setting (FOXHUNT_THREADS, else OMP_NUM_THREADS, else 1). */
  int32_t threads;
  /** 1: run the models one by one (predict --serial); 0 (default): concurrently. The decisions
   *  are the same. */
  int32_t serial;
} foxhunt_desk_options;

/** One bar. Prices > 0 and finite, high >= low, volume >= 0, timestamps (Unix seconds) strictly
 *  increasing per instrument. */
typedef struct foxhunt_bar {
  int64_t timestamp;  /**< Unix seconds */
  double open;        /**< first trade price */
  double high;        /**< highest price */
  double low;         /**< lowest price */
  double close;       /**< last trade price */
  double volume;      /**< traded quantity (>= 0) */
  const char* symbol; /**< the instrument (FOXHUNT_DESK_PANEL; ignored, may be NULL, in series) */
} foxhunt_bar;

/** One trade print of a tape. */
typedef struct foxhunt_print {
  int64_t time_ns; /**< Unix time in nanoseconds, not before the previous print */
  double price;    /**< trade price (> 0) */
  double size;     /**< traded quantity (> 0) */
  int32_t side;    /**< +1 buy, -1 sell, 0 unknown (the tick rule decides) */
} foxhunt_print;

/** An instrument's decision on its latest bar. */
typedef struct foxhunt_decision {
  int64_t timestamp;    /**< the bar's timestamp */
  double decision;      /**< the target position in [-1, 1] (0 while no model is ready) */
  double position;      /**< the position held into this bar (the previous decision) */
  double latency_us;    /**< wall time of the push that produced it (the whole timestamp) */
  int32_t ready;        /**< 1 when every model is past its warm-up, else 0 */
  int32_t models_ready; /**< how many models are past their warm-up */
} foxhunt_decision;

/** The defaults: size set, device "cpu", rule from the directory, FOXHUNT_DESK_SERIES, threads
 *  and serial 0. */
FOXHUNT_API void foxhunt_desk_options_init(foxhunt_desk_options* options);

/** Opens the bundles `foxhunt train all --out DIR` wrote (DIR/<model>/bundle.fhb for every model,
 *  and DIR/rule.json). `options` may be NULL (the defaults). On success *out is a handle to close
 *  with foxhunt_desk_close; on failure *out is NULL (a missing or bad bundle: FOXHUNT_ERR_INPUT
 *  naming the directory and each bundle). */
FOXHUNT_API foxhunt_status foxhunt_desk_open(const char* bundle_dir,
                                             const foxhunt_desk_options* options,
                                             foxhunt_desk** out);
/** Releases the desk and everything it holds; NULL is a no-op. The handle is invalid after. */
FOXHUNT_API void foxhunt_desk_close(foxhunt_desk* desk);

/** Feeds one bar: the features, every model, the decision. An invalid bar is FOXHUNT_ERR_INPUT
 *  and changes nothing (the desk goes on with the next valid bar). */
FOXHUNT_API foxhunt_status foxhunt_desk_push_bar(foxhunt_desk* desk, const foxhunt_bar* bar);
/** Feeds the bars of one timestamp, at most one per symbol (FOXHUNT_DESK_PANEL; a series desk
 *  takes n = 1): one batch per model across the instruments. Every bar is checked before any
 *  state changes: one invalid bar is FOXHUNT_ERR_INPUT naming its symbol, and nothing changes.
 *  To get `foxhunt predict`'s decisions on a panel bit for bit, push each timestamp's bars in one
 *  call, in the byte order of their symbols. */
FOXHUNT_API foxhunt_status foxhunt_desk_push_bars(foxhunt_desk* desk, const foxhunt_bar* bars,
                                                  size_t n);

/** Feeds one trade print to a series desk whose bundles were trained on tape bars: the desk
 *  builds bars with the bar spec the bundles record (the bar builder of `foxhunt predict
 *  --ticks`), and when this print closes a bar it feeds that bar, with its flow, as
 *  foxhunt_desk_push_bar would. *closed (may be NULL) is set to 1 when a bar closed (then
 *  foxhunt_desk_decision has its decision), else 0. FOXHUNT_ERR_INPUT for a panel desk, for
 *  bundles that record no bar spec, and for a bad print (out of order, price or size <= 0),
 *  which changes nothing. */
FOXHUNT_API foxhunt_status foxhunt_desk_push_print(foxhunt_desk* desk, const foxhunt_print* print,
                                                   int32_t* closed);

/** The decision on `symbol`'s latest bar (a series desk: `symbol` is ignored and may be NULL).
 *  FOXHUNT_ERR_INPUT when no bar of that symbol was accepted yet. */
FOXHUNT_API foxhunt_status foxhunt_desk_decision(const foxhunt_desk* desk, const char* symbol,
                                                 foxhunt_decision* out);
/** The number of models the desk serves. */
FOXHUNT_API foxhunt_status foxhunt_desk_model_count(const foxhunt_desk* desk, size_t* out);
/** The name of model `index` (< model count), in the order of foxhunt_desk_signals. The string is
 *  the desk's: valid until foxhunt_desk_close. */
FOXHUNT_API foxhunt_status foxhunt_desk_model_name(const foxhunt_desk* desk, size_t index,
                                                   const char** out);
/** Each model's signal in [-1, 1] on `symbol`'s latest bar (NaN for a model still warming up),
 *  written to out[0 .. count). *count is always set to the number of models; a `capacity` below
 *  it is FOXHUNT_ERR_INPUT and writes nothing (out may be NULL to ask for the count that way). */
FOXHUNT_API foxhunt_status foxhunt_desk_signals(const foxhunt_desk* desk, const char* symbol,
                                                double* out, size_t capacity, size_t* count);

/* ---- memory questions, as JSON --------------------------------------------------------------- */

/** The largest training batch of a model that fits a memory budget (`foxhunt plan --json`).
 *  `request_json` is an object; every key is optional except "model":
 *    {"model": "<name from foxhunt models>", "device": "cpu", "device_profile": "rtx3050ti-4gb",
 *     "budget_mib": 4096, "seq_len": 0, "seed": 42, "margin": 0.1, "pow2": false,
 *     "min_batch": 1, "max_batch": 65536, "step": "trainer"|"synthetic", "optimizer": "adam",
 *     "trainer_options": {...}, "verify": true}
 *  ("budget_mib" wins over "device_profile"; neither: the reference profile). On success *out is
 *  the plan as JSON text (with "ok": true), to free with foxhunt_free_string; on failure *out is
 *  NULL (a budget too small for the smallest batch: FOXHUNT_ERR_OOM naming the largest tag). */
FOXHUNT_API foxhunt_status foxhunt_plan_json(const char* request_json, char** out);
/** Every model's measured serving footprint against its target, the budget and the headroom
 *  (`foxhunt budget --json`), and with "instruments" a desk of that many instruments and the
 *  largest universe that fits (`budget --instruments`). Every key is optional:
 *    {"device": "cpu", "device_profile": "...", "budget_mib": 4096, "headroom_mib": 500,
 *     "views": true, "serving_batch": 64, "training_batch": 64, "seed": 42,
 *     "precision": "<model>=int8,...", "targets_mib": {"<model>": 150, ...},
 *     "instruments": 64, "bundles": "DIR", "exhaustive": false}
 *  ("exhaustive": true warms every instrument of every desk up, `budget --exhaustive`: minutes
 *  instead of seconds). *out as for foxhunt_plan_json: the report ("ok" says whether it passed;
 *  a failed budget is still FOXHUNT_OK), with "desk" when "instruments" was given. */
FOXHUNT_API foxhunt_status foxhunt_budget_json(const char* request_json, char** out);
/** Frees a string a foxhunt call wrote to a `char** out`; NULL is a no-op. */
FOXHUNT_API void foxhunt_free_string(char* s);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FOXHUNT_FOXHUNT_H */

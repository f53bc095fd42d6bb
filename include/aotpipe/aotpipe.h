#pragma once
// The umbrella header of aotpipe: everything a user of the library needs.
#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/meta_propagation.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/passes.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/graph/tensor_meta.h>
#include <aotpipe/graph/verifier.h>
#include <aotpipe/graph/tracer.h>
#include <aotpipe/runtime/aot_function.h>
#include <aotpipe/stages/compile/backends.h>
#include <aotpipe/stages/compile_state.h>
#include <aotpipe/stages/metadata/collect_metadata.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

// weft_checkpoints: a GCC 12 plugin that keeps -fsplit-stack's prologue
// check only in the functions stackcheck names (mechanism B of weft's
// linked stacks: checks where the whole-program analysis says, instead of
// one in every function).
//
//   gcc -fsplit-stack -fplugin=weft_checkpoints.so
//       -fplugin-arg-weft_checkpoints-list=FILE
//       [-fplugin-arg-weft_checkpoints-entries=ENTRIES]
//       [-fplugin-arg-weft_checkpoints-verbose]
//
// FILE (from `stackcheck --checkpoint-functions FILE`) holds one assembler
// name per line; '#' starts a comment. Every other function compiled gets
// the no_split_stack attribute, which makes gcc leave out its split-stack
// prologue. The list must come from a build with the same compiler and
// flags, so that the functions (clones included) are the same.
//
// ENTRIES (from `stackcheck --entry-stacks`) holds 'NAME FIRST_CHUNK
// STATIC_BOUND|-' per line: for each of those functions compiled, a row
// {address, first chunk bytes, static bound bytes or 0} goes into the
// section weft_entry_stacks, from which the runtime sizes the first chunk
// of a thread started there (src/stack/linked.hpp). The row is written
// from the function's own unit, so static functions (most thread entries)
// are in the table too.

#define INCLUDE_SET
#define INCLUDE_STRING
#include "gcc-plugin.h"
#include "plugin-version.h"
#include "tree.h"
#include "function.h"
#include "stringpool.h"
#include "attribs.h"
#include "diagnostic-core.h"
#include "output.h"

#include <map>
#include <utility>

// gcc loads only plugins that define this symbol: a plugin runs linked into
// gcc (a GPL program) and uses its internals, so its licence must be
// GPL-compatible, and defining the symbol is the plugin's statement so.
int plugin_is_GPL_compatible;

namespace {

const char *const plugin_name = "weft_checkpoints";

std::set<std::string> keep;     // the checkpoint functions
std::map<std::string, std::pair<unsigned long, unsigned long>> entries; // name -> (first chunk, static bound or 0)
bool verbose = false;

// The row of an entry in the runtime's table, written between functions
// (the previous one is all out; push/pop keep gcc's idea of the section).
void
emit_entry_row (const char *name, unsigned long first, unsigned long bound)
{
  fprintf (asm_out_file,
           "\t.pushsection weft_entry_stacks,\"aw\",@progbits\n"
           "\t.balign 8\n\t.quad %s\n\t.long %lu\n\t.long %lu\n"
           "\t.popsection\n",
           name, first, bound);
  if (verbose)
    fprintf (stderr, "%s: entry %s: first chunk %lu, static bound %lu\n",
             plugin_name, name, first, bound);
}

// Runs once per function, just before its GIMPLE optimisation and RTL
// passes: after the IPA passes, so inlining and cloning are not affected
// by the attribute (the call graph stays the one stackcheck analysed) and
// each clone (f.part.0, f.constprop.0) is seen under the assembler name
// -fcallgraph-info gave it; before expansion, where gcc decides on the
// split-stack prologue.
void
on_function (void *, void *)
{
  if (!cfun || !cfun->decl)
    return;
  tree decl = cfun->decl;
  const char *name = IDENTIFIER_POINTER (DECL_ASSEMBLER_NAME (decl));
  if (name[0] == '*')           // an asm("label"): the symbol is the rest
    name++;
  auto e = entries.find (name);
  if (e != entries.end ())
    emit_entry_row (name, e->second.first, e->second.second);
  if (keep.count (name))
    {
      if (verbose)
        fprintf (stderr, "%s: kept %s\n", plugin_name, name);
      return;
    }
  // gcc 12 reads va_start's stack arguments through a pointer that only the
  // split-stack prologue sets up (%r11 on x86-64), and still does so for a
  // no_split_stack function: a variadic function must keep its prologue.
  if (cfun->stdarg)
    {
      if (verbose)
        fprintf (stderr, "%s: kept %s (variadic)\n", plugin_name, name);
      return;
    }
  if (!lookup_attribute ("no_split_stack", DECL_ATTRIBUTES (decl)))
    DECL_ATTRIBUTES (decl) = tree_cons (get_identifier ("no_split_stack"),
                                        NULL_TREE, DECL_ATTRIBUTES (decl));
}

// Reads the list; false (after an error naming the file) if it cannot.
bool
read_list (const char *path)
{
  FILE *f = fopen (path, "r");
  if (!f)
    {
      error ("%s: cannot read the checkpoint function list %qs: %s",
             plugin_name, path, xstrerror (errno));
      return false;
    }
  char *line = NULL;
  size_t cap = 0;
  while (getline (&line, &cap, f) != -1)
    {
      std::string s (line);
      s = s.substr (0, s.find ('#'));
      size_t b = s.find_first_not_of (" \t\r\n");
      if (b == std::string::npos)
        continue;
      size_t e = s.find_last_not_of (" \t\r\n");
      keep.insert (s.substr (b, e - b + 1));
    }
  int err = ferror (f) ? errno : 0;
  free (line);
  fclose (f);
  if (err)
    error ("%s: cannot read the checkpoint function list %qs: %s",
           plugin_name, path, xstrerror (err));
  return !err;
}

// Reads the entries file: false (after an error naming the file and
// line) if it cannot.
bool
read_entries (const char *path)
{
  FILE *f = fopen (path, "r");
  if (!f)
    {
      error ("%s: cannot read the entry stacks %qs: %s", plugin_name, path,
             xstrerror (errno));
      return false;
    }
  char *line = NULL;
  size_t cap = 0;
  int n = 0;
  bool ok = true;
  while (ok && getline (&line, &cap, f) != -1)
    {
      ++n;
      std::string s (line);
      s = s.substr (0, s.find ('#'));
      if (s.find_first_not_of (" \t\r\n") == std::string::npos)
        continue;
      char name[4096], sb[32];
      unsigned long first;
      if (sscanf (s.c_str (), "%4095s %lu %31s", name, &first, sb) != 3
          || first > 0xffffffffUL)
        {
          error ("%s: %s:%d: expected %<NAME FIRST_CHUNK STATIC_BOUND|-%>",
                 plugin_name, path, n);
          ok = false;
          break;
        }
      unsigned long bound = 0;
      if (strcmp (sb, "-"))
        {
          char *end;
          bound = strtoul (sb, &end, 10);
          if (*end || bound > 0xffffffffUL)
            {
              error ("%s: %s:%d: %qs is not a byte count or %<-%>",
                     plugin_name, path, n, sb);
              ok = false;
              break;
            }
        }
      entries[name] = std::make_pair (first, bound);
    }
  free (line);
  fclose (f);
  return ok;
}

} // namespace

int
plugin_init (struct plugin_name_args *info, struct plugin_gcc_version *version)
{
  if (!plugin_default_version_check (version, &gcc_version))
    {
      error ("%s: built for gcc %s, not this compiler", plugin_name,
             gcc_version.basever);
      return 1;
    }
  const char *list = NULL;
  for (int i = 0; i < info->argc; i++)
    {
      const plugin_argument &a = info->argv[i];
      if (!strcmp (a.key, "list") && a.value)
        list = a.value;
      else if (!strcmp (a.key, "entries") && a.value)
        {
          if (!read_entries (a.value))
            return 1;
        }
      else if (!strcmp (a.key, "verbose") && !a.value)
        verbose = true;
      else
        {
          error ("%s: unknown argument %<-fplugin-arg-%s-%s%>", plugin_name,
                 plugin_name, a.key);
          return 1;
        }
    }
  // Without a list every function would lose its check: refuse instead.
  if (!list)
    {
      error ("%s: missing %<-fplugin-arg-%s-list=FILE%>", plugin_name,
             plugin_name);
      return 1;
    }
  if (!read_list (list))
    return 1;

  static plugin_info about = { "1", "keep -fsplit-stack prologues only in "
                                    "listed functions" };
  register_callback (plugin_name, PLUGIN_INFO, NULL, &about);
  register_callback (plugin_name, PLUGIN_ALL_PASSES_START, on_function, NULL);
  return 0;
}

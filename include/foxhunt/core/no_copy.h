#pragma once
/// \file no_copy.h
/// FOXHUNT_NO_COPY(Class): deletes Class's copy constructor and copy assignment, in the habit of
/// PyTorch's C10_DISABLE_COPY_AND_ASSIGN. For handles and guards whose copy would share or
/// release what the original owns (a thread pool, a reservation, a signal handler).

/// Inside the class body: `FOXHUNT_NO_COPY(Guard);`.
#define FOXHUNT_NO_COPY(Class)  \
  Class(const Class&) = delete; \
  Class& operator=(const Class&) = delete

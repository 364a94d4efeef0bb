! coherence_module.f90 - Fortran module arrays (allocatables of module
! fields) mapped with `enter data copyin`, computed on by a module
! subroutine under `present`, and printed after a partial `update host`
! that brings back only their first elements (VARIANT bad: a coherence
! bug; the read of p(n/2) happens inside the Fortran runtime's `print`).
!
! The arrays are mapped at line 91: `!$acc enter data copyin(p, q)`.
! Each step calls smooth() at line 93: `call smooth(n)`; its two compute
! constructs (lines 37 and 41) use the device copies. After the loop
! VARIANT bad brings back p(1:10) at line 98: `!$acc update host(p(1:10))`,
! then reads p(5) (current) and p(n/2) (stale: the device copy is newer)
! at line 100: `print *, 'values:', p(5), p(n/2)`.
! VARIANT fixed brings back the whole array at line 96: `!$acc update host(p)`.
! The copies go at line 103: `!$acc exit data delete(p, q)`. On a GPU the
! bad variant prints p(n/2) as it was before the loop and differs from
! the reference; on the host fallback both variants are right.
!
! Usage: coherence_module_f90 [N [STEPS [VARIANT]]]
!        defaults: 1048576 100 bad; VARIANT is bad or fixed
!
! Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*N bytes): 2
! uploads of B at line 91, 2*S launches, 1 download of 80 bytes
! (bad, line 98) or of B (fixed, line 96). With `accprof run
! --check coherence` on a GPU, VARIANT bad: a stale host read of p at line
! 100 (the construct at line 41 wrote it), one C1; VARIANT fixed: none.
!
! Output: "values: <p(5)> <p(n/2)>", "checksum: <their sum>", then
! "reference: match" when both equal a plain CPU computation (relative
! 1e-9), else "reference: MISMATCH" and exit status 1. Bad args: exit 2.
module fields
  implicit none
  real(8), allocatable :: p(:), q(:)
contains
  subroutine smooth(n)
    integer, intent(in) :: n
    integer :: i
    !$acc parallel loop present(p, q)
    do i = 2, n - 1
      q(i) = p(i) + 0.25d0 * (p(i - 1) - 2d0 * p(i) + p(i + 1))
    end do
    !$acc parallel loop present(p, q)
    do i = 2, n - 1
      p(i) = q(i)
    end do
  end subroutine smooth

  subroutine init(a, n)
    integer, intent(in) :: n
    real(8), intent(out) :: a(n)
    integer :: i
    do i = 1, n
      a(i) = merge(1d0, 0d0, mod(i - 1, 97) == 0 .or. i == n / 2)
    end do
  end subroutine init
end module fields

program coherence_module
  use fields
  implicit none
  integer :: n, steps, s, i, nargs, stat
  character(len=32) :: arg, variant
  real(8), allocatable :: r(:), rn(:)
  real(8) :: got(2), want(2)
  logical :: match
  n = 1048576
  steps = 100
  variant = 'bad'
  nargs = command_argument_count()
  if (nargs > 3) then
    write (0, '(a)') 'usage: coherence_module_f90 [N [STEPS [VARIANT]]]'
    stop 2
  end if
  if (nargs >= 1) then
    call get_command_argument(1, arg)
    read (arg, *, iostat=stat) n
    if (stat /= 0 .or. n < 20) call bad(1, arg)
  end if
  if (nargs >= 2) then
    call get_command_argument(2, arg)
    read (arg, *, iostat=stat) steps
    if (stat /= 0 .or. steps < 1) call bad(2, arg)
  end if
  if (nargs >= 3) call get_command_argument(3, variant)
  if (variant /= 'bad' .and. variant /= 'fixed') then
    write (0, '(3a)') "coherence_module_f90: VARIANT must be bad or fixed, got '", trim(variant), "'"
    stop 2
  end if
  allocate (p(n), q(n))
  call init(p, n)
  call init(q, n)
  !$acc enter data copyin(p, q)
  do s = 1, steps
    call smooth(n)
  end do
  if (variant == 'fixed') then
    !$acc update host(p)
  else
    !$acc update host(p(1:10))
  end if
  print *, 'values:', p(5), p(n/2)
  got = [p(5), p(n / 2)]
  write (*, '(a, es22.14)') 'checksum: ', sum(got)
  !$acc exit data delete(p, q)
  allocate (r(n), rn(n))
  call init(r, n)
  call init(rn, n)
  do s = 1, steps
    do i = 2, n - 1
      rn(i) = r(i) + 0.25d0 * (r(i - 1) - 2d0 * r(i) + r(i + 1))
    end do
    r(2:n - 1) = rn(2:n - 1)
  end do
  want = [r(5), r(n / 2)]
  match = all(abs(got - want) <= 1d-9 * max(1d0, abs(want)))
  if (match) then
    print '(a)', 'reference: match'
  else
    print '(a)', 'reference: MISMATCH'
    stop 1
  end if
contains
  subroutine bad(i, a)
    integer, intent(in) :: i
    character(len=*), intent(in) :: a
    write (0, '(a, i0, 3a)') 'coherence_module_f90: argument ', i, ' must be an integer (N >= 20, STEPS >= 1), got ''', &
      trim(a), ''''
    stop 2
  end subroutine bad
end program coherence_module

echo hi
